package validation

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateNamespace(t *testing.T) {
	valid := func() *corev1.Namespace {
		return defaulted(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	}
	runCreateCases(t, valid, []errCase[*corev1.Namespace]{
		{"name must be a DNS label", func(n *corev1.Namespace) { n.Name = "team.a" }, field.ErrorTypeInvalid, "metadata.name", "must not contain dots"},
		{"namespaces are not namespaced", func(n *corev1.Namespace) { n.Namespace = "default" }, field.ErrorTypeForbidden, "metadata.namespace", ""},
		{"finalizer must be standard or qualified", func(n *corev1.Namespace) { n.Spec.Finalizers = append(n.Spec.Finalizers, "mine") },
			field.ErrorTypeInvalid, "spec.finalizers", "neither a standard finalizer name nor is it fully qualified"},
	})
}

func TestValidateConfigMap(t *testing.T) {
	valid := func() *corev1.ConfigMap {
		return defaulted(&corev1.ConfigMap{ObjectMeta: objMeta("cfg"), Data: map[string]string{"app.conf": "x=1"}, BinaryData: map[string][]byte{"logo.png": {1}}})
	}
	runCreateCases(t, valid, []errCase[*corev1.ConfigMap]{
		{"keys are config map keys", func(c *corev1.ConfigMap) { c.Data["bad/key"] = "" }, field.ErrorTypeInvalid, "data[bad/key]", ""},
		{"key may not be in data and binaryData", func(c *corev1.ConfigMap) { c.Data["logo.png"] = "" },
			field.ErrorTypeInvalid, "data[logo.png]", "duplicate of key present in binaryData"},
		{"total size at most 1MiB", func(c *corev1.ConfigMap) { c.Data["big"] = strings.Repeat("x", 1<<20) }, field.ErrorTypeTooLong, "[]", "1048576 bytes"},
	})
	immutableCM := func() *corev1.ConfigMap {
		c := stored(valid())
		c.Immutable = new(true)
		return c
	}
	runUpdateCases(t, immutableCM, []updateCase[*corev1.ConfigMap]{
		{"labels of an immutable config map may change", func(c *corev1.ConfigMap) { c.Labels = map[string]string{"a": "b"} }, "", "", ""},
		{"data frozen when immutable", func(c *corev1.ConfigMap) { c.Data["app.conf"] = "x=2" },
			field.ErrorTypeForbidden, "data", "field is immutable when `immutable` is set"},
		{"immutable cannot be unset", func(c *corev1.ConfigMap) { c.Immutable = new(false) },
			field.ErrorTypeForbidden, "immutable", "field is immutable when `immutable` is set"},
	})
	runUpdateCases(t, func() *corev1.ConfigMap { return stored(valid()) }, []updateCase[*corev1.ConfigMap]{
		{"data of a mutable config map may change", func(c *corev1.ConfigMap) { c.Data["app.conf"] = "x=2" }, "", "", ""},
	})
}

func TestValidateSecret(t *testing.T) {
	valid := func() *corev1.Secret {
		return defaulted(&corev1.Secret{ObjectMeta: objMeta("creds"), Data: map[string][]byte{"password": []byte("s3cret")}})
	}
	runCreateCases(t, valid, []errCase[*corev1.Secret]{
		{"keys are config map keys", func(s *corev1.Secret) { s.Data["a b"] = nil }, field.ErrorTypeInvalid, "data[a b]", ""},
		{"total size at most 1MiB", func(s *corev1.Secret) { s.Data["big"] = make([]byte, 1<<20) }, field.ErrorTypeTooLong, "data", ""},
		{"service account token needs the account annotation", func(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken },
			field.ErrorTypeRequired, "metadata.annotations[kubernetes.io/service-account.name]", ""},
		{"dockerconfigjson needs its key", func(s *corev1.Secret) { s.Type = corev1.SecretTypeDockerConfigJson },
			field.ErrorTypeRequired, "data[.dockerconfigjson]", ""},
		{"dockerconfigjson must be JSON", func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeDockerConfigJson
			s.Data[corev1.DockerConfigJsonKey] = []byte("{")
		}, field.ErrorTypeInvalid, "data[.dockerconfigjson]", ""},
		{"tls needs a certificate", func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS; s.Data["tls.key"] = []byte("k") },
			field.ErrorTypeRequired, "data[tls.crt]", ""},
		{"basic auth needs username or password", func(s *corev1.Secret) { s.Type = corev1.SecretTypeBasicAuth; delete(s.Data, "password") },
			field.ErrorTypeRequired, "data[username]", ""},
		{"ssh auth needs a private key", func(s *corev1.Secret) { s.Type = corev1.SecretTypeSSHAuth }, field.ErrorTypeRequired, "data[ssh-privatekey]", ""},
	})
	runUpdateCases(t, func() *corev1.Secret { return stored(valid()) }, []updateCase[*corev1.Secret]{
		{"data may change", func(s *corev1.Secret) { s.Data["password"] = []byte("new") }, "", "", ""},
		{"type is immutable", func(s *corev1.Secret) { s.Type = "example.com/custom" }, field.ErrorTypeInvalid, "type", "field is immutable"},
	})
}

func TestValidateServiceAccountAndBinding(t *testing.T) {
	runCreateCases(t, func() *corev1.ServiceAccount {
		return defaulted(&corev1.ServiceAccount{ObjectMeta: objMeta("builder")})
	},
		[]errCase[*corev1.ServiceAccount]{
			{"name must be a DNS subdomain", func(s *corev1.ServiceAccount) { s.Name = "Builder" }, field.ErrorTypeInvalid, "metadata.name", ""},
		})
	runCreateCases(t, func() *corev1.Binding {
		return &corev1.Binding{ObjectMeta: objMeta("web"), Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	}, []errCase[*corev1.Binding]{
		{"target name required", func(b *corev1.Binding) { b.Target.Name = "" }, field.ErrorTypeRequired, "target.name", ""},
		{"target must be a node", func(b *corev1.Binding) { b.Target.Kind = "Pod" }, field.ErrorTypeNotSupported, "target.kind", ""},
	})
}

func TestValidateNode(t *testing.T) {
	valid := func() *corev1.Node {
		return defaulted(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{
			PodCIDR: "10.42.1.0/24", PodCIDRs: []string{"10.42.1.0/24", "fd00:42:1::/64"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		}, Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}})
	}
	runCreateCases(t, valid, []errCase[*corev1.Node]{
		{"pod CIDR syntax", func(n *corev1.Node) { n.Spec.PodCIDR = "10.42.1.0"; n.Spec.PodCIDRs = nil }, field.ErrorTypeInvalid, "spec.podCIDR", ""},
		{"at most one CIDR per family", func(n *corev1.Node) { n.Spec.PodCIDRs[1] = "10.43.1.0/24" },
			field.ErrorTypeInvalid, "spec.podCIDRs", "may specify no more than one CIDR for each IP family"},
		{"taint effect required", func(n *corev1.Node) { n.Spec.Taints[0].Effect = "" }, field.ErrorTypeRequired, "spec.taints[0].effect", ""},
		{"taint key/effect pairs unique", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, n.Spec.Taints[0]) },
			field.ErrorTypeDuplicate, "spec.taints[1]", "taints must be unique by key and effect pair"},
	})
	runUpdateCases(t, func() *corev1.Node { return stored(valid()) }, []updateCase[*corev1.Node]{
		{"taints may change", func(n *corev1.Node) { n.Spec.Taints = nil }, "", "", ""},
		{"pod CIDRs fixed once set", func(n *corev1.Node) { n.Spec.PodCIDR = "10.42.2.0/24"; n.Spec.PodCIDRs = []string{"10.42.2.0/24"} },
			field.ErrorTypeForbidden, "spec.podCIDRs", "node updates may not change podCIDR"},
	})
}

func TestValidateLimitRangeAndQuota(t *testing.T) {
	validLR := func() *corev1.LimitRange {
		return defaulted(&corev1.LimitRange{ObjectMeta: objMeta("limits"), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Min:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}}})
	}
	runCreateCases(t, validLR, []errCase[*corev1.LimitRange]{
		{"min at most max", func(l *corev1.LimitRange) { l.Spec.Limits[0].Min[corev1.ResourceCPU] = resource.MustParse("3") },
			field.ErrorTypeInvalid, "spec.limits[0].min[cpu]", "min value 3 is greater than max value 2"},
		{"type must be standard or qualified", func(l *corev1.LimitRange) { l.Spec.Limits[0].Type = "Node" },
			field.ErrorTypeInvalid, "spec.limits[0].type", "must be a standard limit type or fully qualified"},
		{"pod limits have no defaults", func(l *corev1.LimitRange) {
			l.Spec.Limits = append(l.Spec.Limits, corev1.LimitRangeItem{Type: corev1.LimitTypePod, Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
		}, field.ErrorTypeForbidden, "spec.limits[1].default", "may not be specified when `type` is 'Pod'"},
	})
	validRQ := func() *corev1.ResourceQuota {
		return defaulted(&corev1.ResourceQuota{ObjectMeta: objMeta("quota"), Spec: corev1.ResourceQuotaSpec{
			Hard:   corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceRequestsCPU: resource.MustParse("4")},
			Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating},
		}})
	}
	runCreateCases(t, validRQ, []errCase[*corev1.ResourceQuota]{
		{"quota resource must be standard", func(q *corev1.ResourceQuota) { q.Spec.Hard["widgets"] = resource.MustParse("1") },
			field.ErrorTypeInvalid, "spec.hard[widgets]", "must be a standard resource for quota"},
		{"object counts are integers", func(q *corev1.ResourceQuota) { q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("1500m") },
			field.ErrorTypeInvalid, "spec.hard[pods]", "must be an integer"},
		{"conflicting scopes", func(q *corev1.ResourceQuota) {
			q.Spec.Scopes = append(q.Spec.Scopes, corev1.ResourceQuotaScopeTerminating)
		},
			field.ErrorTypeInvalid, "spec.scopes", "conflicting scopes"},
	})
	runUpdateCases(t, func() *corev1.ResourceQuota { return stored(validRQ()) }, []updateCase[*corev1.ResourceQuota]{
		{"hard limits may change", func(q *corev1.ResourceQuota) { q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("20") }, "", "", ""},
		{"scopes are immutable", func(q *corev1.ResourceQuota) { q.Spec.Scopes = nil }, field.ErrorTypeInvalid, "spec.scopes", "field is immutable"},
	})
}

func TestValidateEvents(t *testing.T) {
	runCreateCases(t, func() *corev1.Event {
		return &corev1.Event{ObjectMeta: objMeta("web.1"), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
			Reason: "Started", Message: "started", Type: corev1.EventTypeNormal}
	}, []errCase[*corev1.Event]{
		{"involved object in the event's namespace", func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" },
			field.ErrorTypeInvalid, "involvedObject.namespace", "does not match event.namespace"},
		{"new-style core event needs a reporting component", func(e *corev1.Event) {
			e.EventTime = metav1.NewMicroTime(time.Now())
			e.ReportingInstance, e.Action = "kubelet-node-1", "Start"
		}, field.ErrorTypeRequired, "reportingComponent", ""},
	})
	runCreateCases(t, func() *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: objMeta("web.1"), EventTime: metav1.NewMicroTime(time.Now()), ReportingController: "example.com/ctl",
			ReportingInstance: "ctl-1", Action: "Scale", Reason: "Scaled", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: "default", Name: "web"}}
	}, []errCase[*eventsv1.Event]{
		{"event time required", func(e *eventsv1.Event) { e.EventTime = metav1.MicroTime{} }, field.ErrorTypeRequired, "eventTime", ""},
		{"type Normal or Warning", func(e *eventsv1.Event) { e.Type = "Info" }, field.ErrorTypeInvalid, "type", "has invalid value: Info"},
		{"deprecated count must be unset", func(e *eventsv1.Event) { e.DeprecatedCount = 3 }, field.ErrorTypeInvalid, "deprecatedCount", "needs to be unset"},
		{"series count at least 2", func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 1, LastObservedTime: metav1.NewMicroTime(time.Now())}
		}, field.ErrorTypeInvalid, "series.count", "should be at least 2"},
		{"action required", func(e *eventsv1.Event) { e.Action = "" }, field.ErrorTypeRequired, "action", ""},
	})
}
