package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func ctr0(p *corev1.Pod) *corev1.Container { return &p.Spec.Containers[0] }

func TestValidatePodMetadataAndContainers(t *testing.T) {
	runCreateCases(t, validPod, []errCase[*corev1.Pod]{
		{"missing name is required", func(p *corev1.Pod) { p.Name = "" }, field.ErrorTypeRequired, "metadata.name", "name or generateName is required"},
		{"name must be a DNS subdomain", func(p *corev1.Pod) { p.Name = "Web_1" }, field.ErrorTypeInvalid, "metadata.name", "RFC 1123"},
		{"bad label value", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "a b"} }, field.ErrorTypeInvalid, "metadata.labels", ""},
		{"annotations over 256KiB", func(p *corev1.Pod) { p.Annotations = map[string]string{"a": strings.Repeat("x", 256*1024+1)} },
			field.ErrorTypeTooLong, "metadata.annotations", ""},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, field.ErrorTypeRequired, "spec.containers", ""},
		{"container image required", func(p *corev1.Pod) { ctr0(p).Image = "" }, field.ErrorTypeRequired, "spec.containers[0].image", ""},
		{"container image without surrounding spaces", func(p *corev1.Pod) { ctr0(p).Image = " nginx" },
			field.ErrorTypeInvalid, "spec.containers[0].image", "must not have leading or trailing whitespace"},
		{"container name must be a DNS label", func(p *corev1.Pod) { ctr0(p).Name = "App_1" }, field.ErrorTypeInvalid, "spec.containers[0].name", ""},
		{"container names unique among containers", func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, withPortsCleared(*ctr0(p))) },
			field.ErrorTypeDuplicate, "spec.containers[1].name", ""},
		{"init container name may not reuse a container name", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{withPortsCleared(*ctr0(p))} },
			field.ErrorTypeDuplicate, "spec.initContainers[0].name", ""},
		{"plain init container may not have probes", func(p *corev1.Pod) {
			c := withPortsCleared(*ctr0(p))
			c.Name = "init"
			c.ReadinessProbe = tcpProbe()
			p.Spec.InitContainers = []corev1.Container{c}
		}, field.ErrorTypeForbidden, "spec.initContainers[0].readinessProbe", "restartPolicy=Always"},
		{"ephemeral containers not accepted on create", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
		}, field.ErrorTypeForbidden, "spec.ephemeralContainers", "cannot be set on create"},
		{"image pull policy enum", func(p *corev1.Pod) { ctr0(p).ImagePullPolicy = "Sometimes" }, field.ErrorTypeNotSupported, "spec.containers[0].imagePullPolicy", ""},
		{"termination message policy required", func(p *corev1.Pod) { ctr0(p).TerminationMessagePolicy = "" },
			field.ErrorTypeRequired, "spec.containers[0].terminationMessagePolicy", ""},
		{"regular container may not set restartPolicy", func(p *corev1.Pod) { ctr0(p).RestartPolicy = new(corev1.ContainerRestartPolicyAlways) },
			field.ErrorTypeForbidden, "spec.containers[0].restartPolicy", "non-init containers"},
	})
}

func withPortsCleared(c corev1.Container) corev1.Container {
	c.Ports = nil
	return c
}

func tcpProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
}

func TestValidatePodPortsEnvAndResources(t *testing.T) {
	runCreateCases(t, validPod, []errCase[*corev1.Pod]{
		{"container port above 65535", func(p *corev1.Pod) { ctr0(p).Ports[0].ContainerPort = 70000 },
			field.ErrorTypeInvalid, "spec.containers[0].ports[0].containerPort", "between 1 and 65535"},
		{"container port required", func(p *corev1.Pod) { ctr0(p).Ports[0].ContainerPort = 0 }, field.ErrorTypeRequired, "spec.containers[0].ports[0].containerPort", ""},
		{"port protocol enum", func(p *corev1.Pod) { ctr0(p).Ports[0].Protocol = "HTTP" }, field.ErrorTypeNotSupported, "spec.containers[0].ports[0].protocol", ""},
		{"port names unique", func(p *corev1.Pod) {
			ctr0(p).Ports = append(ctr0(p).Ports, corev1.ContainerPort{Name: "http", ContainerPort: 81, Protocol: "TCP"})
		},
			field.ErrorTypeDuplicate, "spec.containers[0].ports[1].name", ""},
		{"port name must be an IANA service name", func(p *corev1.Pod) { ctr0(p).Ports[0].Name = "http_alt" },
			field.ErrorTypeInvalid, "spec.containers[0].ports[0].name", ""},
		{"host ports unique across containers", func(p *corev1.Pod) {
			ctr0(p).Ports[0].HostPort = 8080
			second := *ctr0(p).DeepCopy()
			second.Name = "sidecar"
			second.Ports[0].Name = ""
			p.Spec.Containers = append(p.Spec.Containers, second)
		}, field.ErrorTypeDuplicate, "spec.containers[1].ports[0].hostPort", ""},
		{"host network needs hostPort equal to containerPort", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			ctr0(p).Ports[0].HostPort = 8080
		}, field.ErrorTypeInvalid, "spec.containers[0].ports[0].containerPort", "must match `hostPort`"},
		{"env name required", func(p *corev1.Pod) { ctr0(p).Env[0].Name = "" }, field.ErrorTypeRequired, "spec.containers[0].env[0].name", ""},
		{"env value and valueFrom are exclusive", func(p *corev1.Pod) {
			ctr0(p).Env[0].ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}
		}, field.ErrorTypeInvalid, "spec.containers[0].env[0].valueFrom", "may not be specified when `value` is not empty"},
		{"env valueFrom needs a source", func(p *corev1.Pod) { ctr0(p).Env[0] = corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{}} },
			field.ErrorTypeInvalid, "spec.containers[0].env[0].valueFrom", "must specify one of"},
		{"env fieldRef path must be supported", func(p *corev1.Pod) {
			ctr0(p).Env[0] = corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.containers"}}}
		}, field.ErrorTypeNotSupported, "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", ""},
		{"env secretKeyRef key required", func(p *corev1.Pod) {
			ctr0(p).Env[0] = corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
		}, field.ErrorTypeRequired, "spec.containers[0].env[0].valueFrom.secretKeyRef.key", ""},
		{"envFrom needs a source", func(p *corev1.Pod) { ctr0(p).EnvFrom = []corev1.EnvFromSource{{Prefix: "APP_"}} },
			field.ErrorTypeInvalid, "spec.containers[0].envFrom", "must specify one of: `configMapRef` or `secretRef`"},
		{"negative quantity", func(p *corev1.Pod) {
			ctr0(p).Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
		},
			field.ErrorTypeInvalid, "spec.containers[0].resources.limits[cpu]", "must be greater than or equal to 0"},
		{"request above limit", func(p *corev1.Pod) {
			ctr0(p).Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
		}, field.ErrorTypeInvalid, "spec.containers[0].resources.requests", "must be less than or equal to cpu limit of 1"},
		{"extended resource needs a limit", func(p *corev1.Pod) {
			ctr0(p).Resources.Requests = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}, field.ErrorTypeRequired, "spec.containers[0].resources.limits", "non overcommitable"},
		{"unknown unqualified resource", func(p *corev1.Pod) { ctr0(p).Resources.Limits = corev1.ResourceList{"gpu": resource.MustParse("1")} },
			field.ErrorTypeInvalid, "spec.containers[0].resources.limits[gpu]", "must be a standard resource for containers"},
	})
}

func TestValidatePodVolumesAndProbes(t *testing.T) {
	runCreateCases(t, validPod, []errCase[*corev1.Pod]{
		{"volume names unique", func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) },
			field.ErrorTypeDuplicate, "spec.volumes[1].name", ""},
		{"volume name must be a DNS label", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = "Data" }, field.ErrorTypeInvalid, "spec.volumes[0].name", ""},
		{"volume needs exactly one source", func(p *corev1.Pod) { p.Spec.Volumes[0].ConfigMap = &corev1.ConfigMapVolumeSource{} },
			field.ErrorTypeForbidden, "spec.volumes[0].configMap", "may not specify more than 1 volume type"},
		{"volume needs a source", func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir = nil }, field.ErrorTypeRequired, "spec.volumes[0]", "must specify a volume type"},
		{"secret volume needs a secret name", func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}
		}, field.ErrorTypeRequired, "spec.volumes[0].secret.secretName", ""},
		{"file mode at most 0777", func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, DefaultMode: new(int32(01000))}}
		}, field.ErrorTypeInvalid, "spec.volumes[0].configMap.defaultMode", "0777"},
		{"token lifetime at least ten minutes", func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(60))}}}}}
		}, field.ErrorTypeInvalid, "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds", "less than 10 minutes"},
		{"mount must name a volume", func(p *corev1.Pod) { ctr0(p).VolumeMounts[0].Name = "cache" },
			field.ErrorTypeNotFound, "spec.containers[0].volumeMounts[0].name", ""},
		{"mount path required", func(p *corev1.Pod) { ctr0(p).VolumeMounts[0].MountPath = "" },
			field.ErrorTypeRequired, "spec.containers[0].volumeMounts[0].mountPath", ""},
		{"sub path must be relative", func(p *corev1.Pod) { ctr0(p).VolumeMounts[0].SubPath = "/etc" },
			field.ErrorTypeInvalid, "spec.containers[0].volumeMounts[0].subPath", "must be a relative path"},
		{"probe needs a handler", func(p *corev1.Pod) { ctr0(p).LivenessProbe = &corev1.Probe{SuccessThreshold: 1} },
			field.ErrorTypeRequired, "spec.containers[0].livenessProbe", "must specify a handler type"},
		{"probe takes only one handler", func(p *corev1.Pod) {
			pr := tcpProbe()
			pr.Exec = &corev1.ExecAction{Command: []string{"true"}}
			ctr0(p).ReadinessProbe = pr
		}, field.ErrorTypeForbidden, "spec.containers[0].readinessProbe.tcpSocket", "may not specify more than 1 handler type"},
		{"liveness success threshold is 1", func(p *corev1.Pod) {
			pr := tcpProbe()
			pr.SuccessThreshold = 2
			ctr0(p).LivenessProbe = pr
		}, field.ErrorTypeInvalid, "spec.containers[0].livenessProbe.successThreshold", "must be 1"},
		{"httpGet scheme enum", func(p *corev1.Pod) {
			ctr0(p).StartupProbe = &corev1.Probe{SuccessThreshold: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/", Port: intstr.FromString("http"), Scheme: "FTP"}}}
		}, field.ErrorTypeNotSupported, "spec.containers[0].startupProbe.httpGet.scheme", ""},
	})
}

func TestValidatePodSchedulingAndPolicy(t *testing.T) {
	runCreateCases(t, validPod, []errCase[*corev1.Pod]{
		{"restart policy enum", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, field.ErrorTypeNotSupported, "spec.restartPolicy", ""},
		{"dns policy required", func(p *corev1.Pod) { p.Spec.DNSPolicy = "" }, field.ErrorTypeRequired, "spec.dnsPolicy", ""},
		{"dns policy None needs dnsConfig", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }, field.ErrorTypeRequired, "spec.dnsConfig", "must provide `dnsConfig`"},
		{"active deadline positive", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = new(int64(0)) }, field.ErrorTypeInvalid, "spec.activeDeadlineSeconds", ""},
		{"node selector is a label map", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd fast"} },
			field.ErrorTypeInvalid, "spec.nodeSelector", ""},
		{"toleration operator enum", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Maybe"}} },
			field.ErrorTypeNotSupported, "spec.tolerations[0].operator", ""},
		{"toleration effect enum", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Exists", Effect: "Sometimes"}}
		},
			field.ErrorTypeNotSupported, "spec.tolerations[0].effect", ""},
		{"toleration without key must be Exists", func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: "Equal", Value: "v"}} },
			field.ErrorTypeInvalid, "spec.tolerations[0].operator", "operator must be Exists when `key` is empty"},
		{"tolerationSeconds only with NoExecute", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: new(int64(5))}}
		}, field.ErrorTypeInvalid, "spec.tolerations[0].effect", "effect must be 'NoExecute'"},
		{"required node affinity needs terms", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		}, field.ErrorTypeRequired, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", ""},
		{"node selector In needs values", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "In"}}}}}}}
		}, field.ErrorTypeRequired, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values", ""},
		{"pod affinity needs a topology key", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
		}, field.ErrorTypeRequired, "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", "can not be empty"},
		{"preferred term weight 1-100", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 0, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname"}}}}}
		}, field.ErrorTypeInvalid, "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "1-100"},
		{"spread maxSkew positive", func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, field.ErrorTypeInvalid, "spec.topologySpreadConstraints[0].maxSkew", ""},
		{"run as user not negative", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = new(int64(-1)) },
			field.ErrorTypeInvalid, "spec.securityContext.runAsUser", ""},
		{"localhost seccomp needs a profile", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}
		}, field.ErrorTypeRequired, "spec.securityContext.seccompProfile.localhostProfile", ""},
		{"no privilege escalation contradicts privileged", func(p *corev1.Pod) {
			ctr0(p).SecurityContext = &corev1.SecurityContext{Privileged: new(true), AllowPrivilegeEscalation: new(false)}
		}, field.ErrorTypeInvalid, "spec.containers[0].securityContext", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"},
		{"scheduling gates block a node name", func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}, field.ErrorTypeForbidden, "spec.nodeName", "schedulingGates"},
	})
}

func TestValidatePodAcceptsRichValidPod(t *testing.T) {
	p := validPod()
	c := ctr0(p)
	c.LivenessProbe = tcpProbe()
	c.ReadinessProbe = defaultedProbe(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}})
	c.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "example.com/gpu": resource.MustParse("1")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), "example.com/gpu": resource.MustParse("1")},
	}
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	c.Env = append(c.Env, corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}})
	sidecar := corev1.Container{Name: "proxy", Image: "envoy", RestartPolicy: new(corev1.ContainerRestartPolicyAlways), StartupProbe: tcpProbe()}
	p.Spec.InitContainers = []corev1.Container{sidecar}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: new(int64(300))}}
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}}
	defaultedPod := defaulted(p)
	expectNoErrors(t, Validate(defaultedPod))
}

func defaultedProbe(p *corev1.Probe) *corev1.Probe {
	pod := defaulted(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{ReadinessProbe: p}}}})
	return pod.Spec.Containers[0].ReadinessProbe
}

func storedPod() *corev1.Pod {
	p := stored(validPod())
	p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "web", Effect: "NoSchedule"}}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
	return p
}

func TestValidatePodUpdate(t *testing.T) {
	runUpdateCases(t, storedPod, []updateCase[*corev1.Pod]{
		{"image may change", func(p *corev1.Pod) { ctr0(p).Image = "nginx:1.26" }, "", "", ""},
		{"labels may change", func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "front"} }, "", "", ""},
		{"tolerations may be added", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "spot", Operator: "Exists"})
		}, "", "", ""},
		{"scheduling gates may be removed", func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }, "", "", ""},
		{"active deadline may be set when unset", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = new(int64(30)) }, "", "", ""},
		{"resource version is required", func(p *corev1.Pod) { p.ResourceVersion = "" },
			field.ErrorTypeInvalid, "metadata.resourceVersion", "must be specified for an update"},
		{"name is immutable", func(p *corev1.Pod) { p.Name = "other" }, field.ErrorTypeInvalid, "metadata.name", "field is immutable"},
		{"ports are immutable", func(p *corev1.Pod) { ctr0(p).Ports[0].ContainerPort = 8080 },
			field.ErrorTypeForbidden, "spec", "pod updates may not change fields other than `spec.containers[*].image`"},
		{"node name is immutable", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" },
			field.ErrorTypeForbidden, "spec", "changed: spec.nodeName"},
		{"containers may not be added", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "b", ImagePullPolicy: "Always", TerminationMessagePolicy: "File"})
		}, field.ErrorTypeForbidden, "spec.containers", "pod updates may not add or remove containers"},
		{"tolerations may not be removed", func(p *corev1.Pod) { p.Spec.Tolerations = nil },
			field.ErrorTypeForbidden, "spec.tolerations", "existing toleration can not be modified"},
		{"scheduling gates may not be added", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/more"})
		}, field.ErrorTypeForbidden, "spec.schedulingGates[1]", "only deletion is allowed"},
	})
	t.Run("active deadline may not grow or be removed", func(t *testing.T) {
		old := storedPod()
		old.Spec.ActiveDeadlineSeconds = new(int64(30))
		grown := old.DeepCopy()
		grown.Spec.ActiveDeadlineSeconds = new(int64(60))
		expectError(t, ValidateUpdate(grown, old), field.ErrorTypeInvalid, "spec.activeDeadlineSeconds", "must be less than or equal to previous value")
		removed := old.DeepCopy()
		removed.Spec.ActiveDeadlineSeconds = nil
		expectError(t, ValidateUpdate(removed, old), field.ErrorTypeInvalid, "spec.activeDeadlineSeconds", "must not update from a positive integer to nil value")
	})
}

func TestValidatePodTemplateKind(t *testing.T) {
	valid := func() *corev1.PodTemplate {
		return defaulted(&corev1.PodTemplate{ObjectMeta: objMeta("tmpl"), Template: podTemplate(map[string]string{"app": "web"})})
	}
	runCreateCases(t, valid, []errCase[*corev1.PodTemplate]{
		{"template labels validated at template.labels", func(pt *corev1.PodTemplate) { pt.Template.Labels["bad key!"] = "x" },
			field.ErrorTypeInvalid, "template.labels", ""},
		{"template containers validated", func(pt *corev1.PodTemplate) { pt.Template.Spec.Containers[0].Image = "" },
			field.ErrorTypeRequired, "template.spec.containers[0].image", ""},
		{"ephemeral containers not allowed in templates", func(pt *corev1.PodTemplate) {
			pt.Template.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
		}, field.ErrorTypeForbidden, "template.spec.ephemeralContainers", "not allowed in pod template"},
	})
}
