package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/registry"
)

func statusCode(err error) int32 {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Code
	}
	return 0
}

func configMap() *corev1.ConfigMap {
	c := &corev1.ConfigMap{Data: map[string]string{"a": "1"}}
	c.Name, c.Namespace = "cm", "default"
	return c
}

func createCM(t *testing.T, reg *registry.Registry, obj *corev1.ConfigMap) apiserver.AdmissionAttributes {
	return apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resource(t, reg, "", "v1", "configmaps"), Object: obj,
		User: &auth.User{Name: "alice", Groups: []string{"devs"}}}
}

func TestValidating_Denial_StatusWithWebhooksMessage(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 403, Message: "the configmap contains unwanted key"}}
	})
	src := &fakeSource{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("deny",
		admissionregistrationv1.ValidatingWebhook{Name: "deny.example.com", ClientConfig: rs.clientConfig("/deny"), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
	err := NewValidating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, configMap()))
	want := `admission webhook "deny.example.com" denied the request: the configmap contains unwanted key`
	if statusCode(err) != 403 || err == nil || err.Error() != want {
		t.Fatalf("err = %v (code %d), want 403 %q", err, statusCode(err), want)
	}
	reqs := rs.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Operation != admissionv1.Create || r.Name != "cm" || r.Namespace != "default" || r.Kind.Kind != "ConfigMap" || r.Resource.Resource != "configmaps" ||
		r.UserInfo.Username != "alice" || r.RequestKind == nil || r.RequestKind.Kind != "ConfigMap" || r.DryRun == nil || *r.DryRun {
		t.Fatalf("request = %+v", r)
	}
	var obj map[string]any
	if err := json.Unmarshal(r.Object.Raw, &obj); err != nil || obj["kind"] != "ConfigMap" || obj["apiVersion"] != "v1" {
		t.Fatalf("object = %s (%v), want a v1 ConfigMap", r.Object.Raw, err)
	}
	if !strings.Contains(string(r.Options.Raw), `"CreateOptions"`) {
		t.Fatalf("options = %s, want CreateOptions", r.Options.Raw)
	}
}

func TestValidating_DenialWithoutCode_400(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{}
	})
	src := &fakeSource{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("deny",
		admissionregistrationv1.ValidatingWebhook{Name: "deny.example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
	err := NewValidating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, configMap()))
	if statusCode(err) != 400 || !strings.HasSuffix(err.Error(), "denied the request without explanation") {
		t.Fatalf("err = %v (code %d), want 400 without explanation", err, statusCode(err))
	}
}

func TestMutating_JSONPatch_ChangesObjectInPlace(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, jsonPatch(`[{"op":"add","path":"/data/mutation-stage-1","value":"yes"}]`))
	src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("m",
		admissionregistrationv1.MutatingWebhook{Name: "add.example.com", ClientConfig: rs.clientConfig("/m"), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
	cm := configMap()
	if err := NewMutating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, cm)); err != nil {
		t.Fatal(err)
	}
	if cm.Data["mutation-stage-1"] != "yes" || cm.Data["a"] != "1" || cm.Name != "cm" {
		t.Fatalf("object after admission = %+v", cm)
	}
}

func TestMutating_PatchedPod_DefaultedAgain(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, jsonPatch(`[{"op":"add","path":"/spec/initContainers","value":[{"name":"init","image":"busybox"}]}]`))
	src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("m",
		admissionregistrationv1.MutatingWebhook{Name: "init.example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "pods")}})}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	pod.Name, pod.Namespace = "p", "default"
	a := apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resource(t, reg, "", "v1", "pods"), Object: pod}
	if err := NewMutating(newConfig(src, reg, nil)).Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		t.Fatalf("init containers = %+v, want one with defaults", pod.Spec.InitContainers)
	}
}

func TestMutating_CustomResource_PatchSetsUnstructuredContent(t *testing.T) {
	res := &registry.Resource{Group: "stable.example.com", Version: "v1", Name: "widgets", Kind: "Widget", Namespaced: true, Custom: true}
	rs := newReviewServer(t, jsonPatch(`[{"op":"replace","path":"/data/mutation-stage-1","value":"yes"}]`))
	src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("m",
		admissionregistrationv1.MutatingWebhook{Name: "cr.example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "stable.example.com", "v1", "widgets")}})}}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "stable.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}, "data": map[string]any{"mutation-stage-1": "no"}}}
	a := apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: res, Object: u}
	if err := NewMutating(newConfig(src, testRegistry(t), nil)).Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(u.Object, "data", "mutation-stage-1"); got != "yes" {
		t.Fatalf("data = %v, want the patched value", u.Object["data"])
	}
}

func TestMutating_IfNeeded_ReinvokedAfterLaterChange(t *testing.T) {
	reg := testRegistry(t)
	var firstCalls atomic.Int32
	first := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		firstCalls.Add(1)
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	second := newReviewServer(t, jsonPatch(`[{"op":"add","path":"/data/b","value":"2"}]`))
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("b-second", admissionregistrationv1.MutatingWebhook{Name: "second.example.com", ClientConfig: second.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}}),
		mutatingConfig("a-first", admissionregistrationv1.MutatingWebhook{Name: "first.example.com", ClientConfig: first.clientConfig(""), SideEffects: &none,
			ReinvocationPolicy: &ifNeeded, AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}}),
	}}
	chain := []apiserver.Admitter{NewMutating(newConfig(src, reg, nil))} // the reinvocation pass is the chain's
	if err := apiserver.AdmitMutating(context.Background(), chain, createCM(t, reg, configMap())); err != nil {
		t.Fatal(err)
	}
	if n := firstCalls.Load(); n != 2 {
		t.Fatalf("first webhook called %d times, want 2 (once more after the second changed the object)", n)
	}
	reqs := first.requests()
	var obj corev1.ConfigMap
	if err := json.Unmarshal(reqs[1].Object.Raw, &obj); err != nil || obj.Data["b"] != "2" {
		t.Fatalf("reinvocation saw %s, want the second webhook's change", reqs[1].Object.Raw)
	}
}

func TestFailurePolicy_UnreachableAndBadAnswers(t *testing.T) {
	reg := testRegistry(t)
	closed := newReviewServer(t, allow)
	closedCC := closed.clientConfig("/x")
	closed.srv.Close()
	wrongUID := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{UID: "not-it", Allowed: true}
	})
	badPatch := newReviewServer(t, jsonPatch(`{"not":"a patch"}`))
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	cases := []struct {
		name    string
		cc      admissionregistrationv1.WebhookClientConfig
		policy  *admissionregistrationv1.FailurePolicyType
		wantErr string // empty: allowed
	}{
		{"unreachable fails closed", closedCC, &fail, `failed calling webhook "hook.example.com": failed to call webhook: Post "` + *closedCC.URL + `?timeout=10s": `},
		{"unreachable by default fails closed", closedCC, nil, `failed calling webhook "hook.example.com": failed to call webhook: Post`},
		{"unreachable ignored", closedCC, &ignore, ""},
		{"wrong uid fails closed", wrongUID.clientConfig(""), &fail, `received invalid webhook response: expected response.uid=`},
		{"wrong uid ignored", wrongUID.clientConfig(""), &ignore, ""},
		{"undecodable patch fails closed", badPatch.clientConfig(""), &fail, `received undecodable patch in webhook response`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("m",
				admissionregistrationv1.MutatingWebhook{Name: "hook.example.com", ClientConfig: tc.cc, FailurePolicy: tc.policy, SideEffects: &none,
					AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
			err := NewMutating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, configMap()))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want the request allowed", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || statusCode(err) != 500):
				t.Fatalf("err = %v (code %d), want a 500 containing %q", err, statusCode(err), tc.wantErr)
			}
		})
	}
}

func TestDryRun_SideEffects(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, allow)
	noneOnDryRun := admissionregistrationv1.SideEffectClassNoneOnDryRun
	for _, tc := range []struct {
		name   string
		se     *admissionregistrationv1.SideEffectClass
		called bool
		code   int32
	}{
		{"None is called", &none, true, 0},
		{"NoneOnDryRun is called", &noneOnDryRun, true, 0},
		{"Some refuses the dry run", &some, false, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rs.requests())
			src := &fakeSource{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("v",
				admissionregistrationv1.ValidatingWebhook{Name: "dry.example.com", ClientConfig: rs.clientConfig(""), SideEffects: tc.se,
					AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
			a := createCM(t, reg, configMap())
			a.DryRun = true
			err := NewValidating(newConfig(src, reg, nil)).Admit(context.Background(), a)
			if statusCode(err) != tc.code || (tc.code != 0) != (err != nil) {
				t.Fatalf("err = %v, want code %d", err, tc.code)
			}
			if tc.code == 400 && err.Error() != `admission webhook "dry.example.com" does not support dry run` {
				t.Fatalf("err = %v", err)
			}
			reqs := rs.requests()
			if called := len(reqs) > before; called != tc.called {
				t.Fatalf("called = %v, want %v", called, tc.called)
			}
			if tc.called && (reqs[len(reqs)-1].DryRun == nil || !*reqs[len(reqs)-1].DryRun) {
				t.Fatal("the review does not say dryRun")
			}
		})
	}
}

func TestReviewVersion_V1beta1Only_SentAsV1beta1(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{UID: "v1beta1-answers-are-not-checked", Allowed: true}
	})
	src := &fakeSource{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("v",
		admissionregistrationv1.ValidatingWebhook{Name: "old.example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1beta1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
	if err := NewValidating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, configMap())); err != nil {
		t.Fatal(err)
	}
	if rs.kind != "admission.k8s.io/v1beta1" {
		t.Fatalf("review sent as %q, want admission.k8s.io/v1beta1", rs.kind)
	}
}

func TestValidating_ManyWebhooks_AllCalledFirstDenialWins(t *testing.T) {
	reg := testRegistry(t)
	ok1, ok2 := newReviewServer(t, allow), newReviewServer(t, allow)
	deny := newReviewServer(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: 422, Message: "no"}}
	})
	hook := func(name string, rs *reviewServer) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: rs.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}}
	}
	src := &fakeSource{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{
		validatingConfig("c", hook("ok2.example.com", ok2)), validatingConfig("a", hook("ok1.example.com", ok1), hook("deny.example.com", deny))}}
	err := NewValidating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, configMap()))
	if statusCode(err) != 422 || !strings.Contains(err.Error(), `"deny.example.com" denied the request: no`) {
		t.Fatalf("err = %v", err)
	}
	if len(ok1.requests()) != 1 || len(ok2.requests()) != 1 {
		t.Fatalf("calls = %d, %d; want every matching webhook called", len(ok1.requests()), len(ok2.requests()))
	}
}

func TestValidating_PatchFromValidatingWebhook_Invalid(t *testing.T) {
	reg := testRegistry(t)
	rs := newReviewServer(t, jsonPatch(`[]`))
	src := &fakeSource{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig("v",
		admissionregistrationv1.ValidatingWebhook{Name: "v.example.com", ClientConfig: rs.clientConfig(""), SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, Rules: []admissionregistrationv1.RuleWithOperations{rule(createOnly, "", "v1", "configmaps")}})}}
	err := NewValidating(newConfig(src, reg, nil)).Admit(context.Background(), createCM(t, reg, configMap()))
	if statusCode(err) != 500 || !strings.Contains(err.Error(), "validating webhook may not return response.patch") {
		t.Fatalf("err = %v", err)
	}
}
