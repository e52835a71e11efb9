package webhook

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/apiserver"
)

func TestShouldCall_RulesSelectorsAndConditions(t *testing.T) {
	reg := testRegistry(t)
	cm := func(ns string, l map[string]string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{}
		c.Name, c.Namespace, c.Labels = "c", ns, l
		return c
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"env": "prod"}}}
	configmaps := resource(t, reg, "", "v1", "configmaps")
	pods := resource(t, reg, "", "v1", "pods")
	namespaces := resource(t, reg, "", "v1", "namespaces")
	nodes := resource(t, reg, "", "v1", "nodes")
	cluster := admissionregistrationv1.ClusterScope
	namespaced := admissionregistrationv1.NamespacedScope
	exact := admissionregistrationv1.Exact
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	ignore := admissionregistrationv1.Ignore
	withScope := func(r admissionregistrationv1.RuleWithOperations, s *admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
		r.Scope = s
		return r
	}
	cases := []struct {
		name string
		hook admissionregistrationv1.ValidatingWebhook
		a    apiserver.AdmissionAttributes
		want bool
	}{
		{"resource and operation match", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("default", nil)}, true},
		{"other operation does not match", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Resource: configmaps, Old: cm("default", nil)}, false},
		{"star does not match subresources", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "*")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pods, Subresource: "status", Object: &corev1.Pod{}}, false},
		{"pods/* matches status", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "pods/*")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pods, Subresource: "status", Object: &corev1.Pod{}}, true},
		{"*/status matches pods/status", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "*/status")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pods, Subresource: "status", Object: &corev1.Pod{}}, true},
		{"connect to pods/attach", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule([]admissionregistrationv1.OperationType{admissionregistrationv1.Connect}, "", "v1", "pods/attach")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpConnect, Resource: pods, Subresource: "attach", Object: &corev1.PodAttachOptions{}, Name: "p", Namespace: "default"}, true},
		{"cluster scope excludes namespaced objects", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{withScope(rule(allOps, "*", "*", "*"), &cluster)}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("default", nil)}, false},
		{"cluster scope includes namespaces", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{withScope(rule(allOps, "*", "*", "*"), &cluster)}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: namespaces, Object: ns}, true},
		{"namespaced scope excludes namespaces", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{withScope(rule(allOps, "*", "*", "*"), &namespaced)}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: namespaces, Object: ns}, false},
		{"equivalent matches another version", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "autoscaling", "v1", "horizontalpodautoscalers")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resource(t, reg, "autoscaling", "v2", "horizontalpodautoscalers"), Object: &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "default"}}}, true},
		{"exact does not match another version", admissionregistrationv1.ValidatingWebhook{MatchPolicy: &exact, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "autoscaling", "v1", "horizontalpodautoscalers")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resource(t, reg, "autoscaling", "v2", "horizontalpodautoscalers"), Object: &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "default"}}}, false},
		{"namespace selector matches the namespace's labels", admissionregistrationv1.ValidatingWebhook{NamespaceSelector: prod, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("team", nil)}, true},
		{"namespace selector excludes other namespaces", admissionregistrationv1.ValidatingWebhook{NamespaceSelector: prod, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("default", nil)}, false},
		{"namespace selector passes cluster-scoped objects", admissionregistrationv1.ValidatingWebhook{NamespaceSelector: prod, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "nodes")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: nodes, Object: &corev1.Node{}}, true},
		{"namespace selector judges a namespace by its own labels", admissionregistrationv1.ValidatingWebhook{NamespaceSelector: prod, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "namespaces")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: namespaces, Object: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{"env": "prod"}}}}, true},
		{"object selector matches the old object's labels", admissionregistrationv1.ValidatingWebhook{ObjectSelector: prod, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: configmaps, Object: cm("default", nil), Old: cm("default", map[string]string{"env": "prod"})}, true},
		{"object selector excludes unlabelled objects", admissionregistrationv1.ValidatingWebhook{ObjectSelector: prod, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("default", nil)}, false},
		{"false match condition skips", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "not-skip-me", Expression: "object.metadata.name != 'c'"}}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("default", nil)}, false},
		{"true match conditions call", admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "ns", Expression: "request.namespace == 'default' && oldObject == null && request.operation == 'CREATE'"}}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("default", nil)}, true},
		{"failing condition with Ignore skips", admissionregistrationv1.ValidatingWebhook{FailurePolicy: &ignore, Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "missing", Expression: "object.data.missing == 'x'"}}},
			apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: cm("default", nil)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.hook.Name = "hook.example.com"
			d := newDispatcher(newConfig(&fakeSource{}, reg, fakeNamespaces{"team": {"env": "prod"}, "default": {}}))
			h := fromValidating(validatingConfig("cfg", tc.hook), 0)
			_, got, err := d.shouldCall(context.Background(), h, newRequest(tc.a))
			if err != nil {
				t.Fatalf("shouldCall: %v", err)
			}
			if got != tc.want {
				t.Fatalf("shouldCall = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShouldCall_FailingConditionWithFail_Forbidden(t *testing.T) {
	reg := testRegistry(t)
	d := newDispatcher(newConfig(&fakeSource{}, reg, nil))
	hook := admissionregistrationv1.ValidatingWebhook{Name: "hook.example.com", Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "missing", Expression: "object.data.missing == 'x'"}}}
	c := &corev1.ConfigMap{}
	c.Name = "c"
	_, _, err := d.shouldCall(context.Background(), fromValidating(validatingConfig("cfg", hook), 0),
		newRequest(apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resource(t, reg, "", "v1", "configmaps"), Object: c}))
	if code := statusCode(err); code != 403 {
		t.Fatalf("err = %v (code %d), want a 403", err, code)
	}
}

func TestShouldCall_NamespaceMissing_NotFound(t *testing.T) {
	reg := testRegistry(t)
	d := newDispatcher(newConfig(&fakeSource{}, reg, fakeNamespaces{}))
	hook := admissionregistrationv1.ValidatingWebhook{Name: "hook.example.com", Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
	c := &corev1.ConfigMap{}
	c.Name, c.Namespace = "c", "gone"
	_, _, err := d.shouldCall(context.Background(), fromValidating(validatingConfig("cfg", hook), 0),
		newRequest(apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resource(t, reg, "", "v1", "configmaps"), Object: c}))
	if code := statusCode(err); code != 404 {
		t.Fatalf("err = %v (code %d), want a 404", err, code)
	}
}

func TestExempt_AdmissionConfigurationKinds_NotSentToWebhooks(t *testing.T) {
	reg := testRegistry(t)
	for _, tc := range []struct {
		group, version, resource string
		want                     bool
	}{
		{"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", true},
		{"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", true},
		{"authorization.k8s.io", "v1", "subjectaccessreviews", true},
		{"authentication.k8s.io", "v1", "tokenreviews", true},
		{"", "v1", "configmaps", false},
		{"apps", "v1", "deployments", false},
	} {
		a := apiserver.AdmissionAttributes{Resource: resource(t, reg, tc.group, tc.version, tc.resource)}
		if got := exempt(a); got != tc.want {
			t.Errorf("exempt(%s) = %v, want %v", tc.resource, got, tc.want)
		}
	}
}
