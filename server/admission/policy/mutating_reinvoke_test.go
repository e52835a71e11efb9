package policy

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
)

// laterPlugin is a reinvocable plugin after the policies that labels the
// object b=yes on the first pass, as a mutating webhook would.
type laterPlugin struct{}

func (laterPlugin) Reinvocable() {}

func (laterPlugin) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	if a.Reinvocation.IsReinvoke() {
		return nil
	}
	d := a.Object.(*appsv1.Deployment)
	d.Labels = map[string]string{"b": "yes"}
	a.Reinvocation.SetShouldReinvoke()
	return nil
}

// counter increments annotation key on each run.
func counter(key string) admissionregistrationv1.Mutation {
	return applyConfig(`Object{metadata: Object.metadata{annotations: {"` + key + `": has(object.metadata.annotations) && "` + key + `" in object.metadata.annotations ? string(int(object.metadata.annotations["` + key + `"]) + 1) : "1"}}}`)
}

func TestMutatingAdmit_ReinvocationPass_AsUpstream(t *testing.T) {
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	never := admissionregistrationv1.NeverReinvocationPolicy
	// replaceB fails (ignored) until label b exists: an IfNeeded policy
	// that ran without patching anything.
	replaceB := func(reinvoke admissionregistrationv1.ReinvocationPolicyType) *admissionregistrationv1.MutatingAdmissionPolicy {
		p := mutatingPolicy("a", reinvoke, jsonPatchMutation(`[JSONPatch{op: "replace", path: "/metadata/labels/b", value: "replaced"}]`))
		p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		return p
	}
	onlyWithB := func(p *admissionregistrationv1.MutatingAdmissionPolicy) *admissionregistrationv1.MutatingAdmissionPolicy {
		p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "b", Expression: `has(object.metadata.labels) && "b" in object.metadata.labels`}}
		return p
	}
	cases := []struct {
		name     string
		policies []*admissionregistrationv1.MutatingAdmissionPolicy
		later    bool // a plugin after the policies labels the object
		want     map[string]string
		wantB    string
	}{
		// Upstream's dispatcher marks every IfNeeded invocation that ran
		// due once any patch applied (its versioned object is dirty), so
		// an IfNeeded policy that patched runs twice even alone.
		{name: "IfNeeded policy that patched runs once more", policies: []*admissionregistrationv1.MutatingAdmissionPolicy{
			mutatingPolicy("p", ifNeeded, counter("n"))}, want: map[string]string{"n": "2"}},
		{name: "Never policy runs once", policies: []*admissionregistrationv1.MutatingAdmissionPolicy{
			mutatingPolicy("p", never, counter("n"))}, later: true, want: map[string]string{"n": "1"}, wantB: "yes"},
		// Upstream's integration test "multiple policies requiring
		// reinvocation": 0->1->2->3, then policy-1 and policy-2 again.
		{name: "IfNeeded policies before a Never one run again, the Never one does not", policies: []*admissionregistrationv1.MutatingAdmissionPolicy{
			mutatingPolicy("policy-1", ifNeeded, counter("foo")), mutatingPolicy("policy-2", ifNeeded, counter("foo")), mutatingPolicy("policy-3", never, counter("foo"))},
			want: map[string]string{"foo": "5"}},
		{name: "IfNeeded policy runs again after a later plugin changed the object", policies: []*admissionregistrationv1.MutatingAdmissionPolicy{
			replaceB(ifNeeded)}, later: true, wantB: "replaced"},
		{name: "IfNeeded policy with no change after it does not run again", policies: []*admissionregistrationv1.MutatingAdmissionPolicy{
			replaceB(ifNeeded)}, wantB: ""},
		{name: "Never policy does not run again after a later plugin's change", policies: []*admissionregistrationv1.MutatingAdmissionPolicy{
			replaceB(never)}, later: true, wantB: "yes"},
		{name: "a policy first matching on the reinvocation pass is not run", policies: []*admissionregistrationv1.MutatingAdmissionPolicy{
			mutatingPolicy("a", ifNeeded, counter("n")), onlyWithB(mutatingPolicy("b", ifNeeded, counter("late")))},
			later: true, want: map[string]string{"n": "2"}, wantB: "yes"},
	}
	deployments := registryRow(t, "apps", "deployments")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
			for _, p := range tc.policies {
				bindings = append(bindings, mutatingBinding("binding-"+p.Name, p.Name))
			}
			l := &fakeMutatingLookups{fakeLookups: &fakeLookups{namespaces: map[string]*corev1.Namespace{
				"prod": {ObjectMeta: metav1.ObjectMeta{Name: "prod"}}}}, mpolicies: tc.policies, mbindings: bindings}
			chain := []apiserver.Admitter{NewMutating(l)}
			if tc.later {
				chain = append(chain, laterPlugin{})
			}
			obj := deployment("prod", 1, nil)
			err := apiserver.AdmitMutating(context.Background(), chain, apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: deployments,
				Object: obj, ApplyTypes: func() managedfields.TypeConverter { return builtinTypes }})
			if err != nil {
				t.Fatal(err)
			}
			if len(obj.Annotations) != len(tc.want) {
				t.Errorf("annotations %v, want %v", obj.Annotations, tc.want)
			}
			for k, v := range tc.want {
				if obj.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, obj.Annotations[k], v)
				}
			}
			if obj.Labels["b"] != tc.wantB {
				t.Errorf("label b = %q, want %q", obj.Labels["b"], tc.wantB)
			}
		})
	}
}

func TestMutatingAdmit_OutsideTheChain_OnePass(t *testing.T) {
	// Admitted alone (no Reinvocation) the plugin has no round of its own:
	// upstream's policies are reinvoked by the chain only.
	l := &fakeMutatingLookups{fakeLookups: &fakeLookups{namespaces: map[string]*corev1.Namespace{"prod": {ObjectMeta: metav1.ObjectMeta{Name: "prod"}}}},
		mpolicies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", admissionregistrationv1.IfNeededReinvocationPolicy, counter("n"))},
		mbindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{mutatingBinding("b", "p")}}
	obj := deployment("prod", 1, nil)
	err := NewMutating(l).Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: registryRow(t, "apps", "deployments"),
		Object: obj, ApplyTypes: func() managedfields.TypeConverter { return builtinTypes }})
	if err != nil || obj.Annotations["n"] != "1" {
		t.Fatalf("err %v, n = %q, want 1", err, obj.Annotations["n"])
	}
}
