package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPodDefaultsMatchUpstream(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "nginx",
				Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				Env: []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "scratch"},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
			},
		},
	}
	Apply(pod)

	got := pod.Spec
	expect(t, "restartPolicy", got.RestartPolicy, corev1.RestartPolicyAlways)
	expect(t, "dnsPolicy", got.DNSPolicy, corev1.DNSClusterFirst)
	expect(t, "terminationGracePeriodSeconds", got.TerminationGracePeriodSeconds, new(int64(30)))
	expect(t, "schedulerName", got.SchedulerName, "default-scheduler")
	expect(t, "securityContext", got.SecurityContext, &corev1.PodSecurityContext{})
	expect(t, "enableServiceLinks", got.EnableServiceLinks, new(true))
	expect(t, "preemptionPolicy left to admission", got.PreemptionPolicy, (*corev1.PreemptionPolicy)(nil))
	c := got.Containers[0]
	wantContainer := corev1.Container{
		Name: "app", Image: "nginx",
		Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
			TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		},
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullAlways,
	}
	if !apiequality.Semantic.DeepEqual(c, wantContainer) {
		t.Fatalf("container defaults differ:\n got %+v\nwant %+v", c, wantContainer)
	}
	vols := got.Volumes
	checks := []struct {
		name string
		ok   bool
	}{
		{"source-less volume becomes emptyDir", vols[0].EmptyDir != nil},
		{"secret defaultMode 420", *vols[1].Secret.DefaultMode == 420},
		{"configMap defaultMode 420", *vols[2].ConfigMap.DefaultMode == 420},
		{"downwardAPI defaultMode 420", *vols[3].DownwardAPI.DefaultMode == 420},
		{"projected defaultMode 420", *vols[4].Projected.DefaultMode == 420},
		{"token expires after an hour", *vols[4].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds == 3600},
		{"hostPath type unset", *vols[5].HostPath.Type == corev1.HostPathUnset},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not applied", c.name)
		}
	}
}

func TestImagePullPolicyFollowsTag(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.25", corev1.PullIfNotPresent},
		{"docker.io/library/nginx:1.25", corev1.PullIfNotPresent},
		{"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
		{"localhost:5000/app", corev1.PullAlways},
		{"localhost:5000/app:v2", corev1.PullIfNotPresent},
		{"Registry.Example.com/app", corev1.PullAlways},
		{"example.com/App", corev1.PullIfNotPresent},
		{"", corev1.PullIfNotPresent},
	} {
		t.Run("image "+tc.image, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: tc.image}}}}
			Apply(pod)
			if got := pod.Spec.Containers[0].ImagePullPolicy; got != tc.want {
				t.Fatalf("pull policy for %q = %s, want %s", tc.image, got, tc.want)
			}
		})
	}
	t.Run("explicit policy is kept", func(t *testing.T) {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", ImagePullPolicy: corev1.PullNever}}}}
		Apply(pod)
		if pod.Spec.Containers[0].ImagePullPolicy != corev1.PullNever {
			t.Fatal("explicit pull policy was overwritten")
		}
	})
}

func TestPodOnlyDefaults(t *testing.T) {
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	spec := func() corev1.PodSpec {
		return corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{
			Name: "c", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{Limits: limits.DeepCopy(), Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}}}
	}
	t.Run("pods get requests from limits and host ports", func(t *testing.T) {
		pod := &corev1.Pod{Spec: spec()}
		Apply(pod)
		c := pod.Spec.Containers[0]
		if q := c.Resources.Requests[corev1.ResourceMemory]; q.String() != "128Mi" {
			t.Errorf("memory request = %s, want 128Mi copied from limit", q.String())
		}
		if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != "100m" {
			t.Errorf("explicit cpu request changed to %s", q.String())
		}
		if c.Ports[0].HostPort != 8080 {
			t.Errorf("hostPort = %d, want 8080 under host networking", c.Ports[0].HostPort)
		}
	})
	t.Run("templates get neither", func(t *testing.T) {
		tmpl := &corev1.PodTemplate{Template: corev1.PodTemplateSpec{Spec: spec()}}
		Apply(tmpl)
		c := tmpl.Template.Spec.Containers[0]
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			t.Error("template got a memory request from its limit")
		}
		if c.Ports[0].HostPort != 0 || tmpl.Template.Spec.EnableServiceLinks != nil {
			t.Error("template got pod-only defaults")
		}
		if tmpl.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
			t.Error("template missed the pod spec defaults")
		}
	})
}

func TestResourceQuantitiesRoundUpToMilli(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "x",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100.1u")}},
	}}}}
	Apply(pod)
	if q := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; q.String() != "1m" {
		t.Fatalf("cpu limit = %s, want 1m", q.String())
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}}}}}
	Apply(pod)
	once := pod.DeepCopy()
	Apply(pod)
	if !apiequality.Semantic.DeepEqual(once, pod) {
		t.Fatal("second Apply changed the pod")
	}
	if pod.Spec.Containers[0].ReadinessProbe.GRPC.Service == nil {
		t.Fatal("grpc probe service not defaulted to empty string")
	}
}
