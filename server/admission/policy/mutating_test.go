package policy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
)

// fakeMutatingLookups adds mutating policies and bindings to fakeLookups.
type fakeMutatingLookups struct {
	*fakeLookups
	mpolicies []*admissionregistrationv1.MutatingAdmissionPolicy
	mbindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
}

func (f *fakeMutatingLookups) MutatingAdmissionPolicies(context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	return append([]*admissionregistrationv1.MutatingAdmissionPolicy(nil), f.mpolicies...), nil
}

func (f *fakeMutatingLookups) MutatingAdmissionPolicyBindings(context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	return f.mbindings, nil
}

var builtinTypes = applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)

func applyConfig(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr}}
}

func jsonPatchMutation(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr}}
}

// mutatingPolicy matches creates and updates of apps/v1 deployments.
func mutatingPolicy(name string, reinvoke admissionregistrationv1.ReinvocationPolicyType, ms ...admissionregistrationv1.Mutation) *admissionregistrationv1.MutatingAdmissionPolicy {
	vap := deploymentPolicy(name, nil)
	return &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: vap.ObjectMeta,
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			MatchConstraints:   vap.Spec.MatchConstraints,
			Mutations:          ms,
			ReinvocationPolicy: reinvoke,
		},
	}
}

func mutatingBinding(name, policyName string) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policyName},
	}
}

func TestMutatingAdmit_Mutations_PatchTheObjectAsUpstream(t *testing.T) {
	never := admissionregistrationv1.NeverReinvocationPolicy
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	sawB := `Object{metadata: Object.metadata{annotations: {"a": has(object.metadata.labels) && "b" in object.metadata.labels ? "saw-b" : "no-b"}}}`
	addB := `Object{metadata: Object.metadata{labels: {"b": "yes"}}}`
	cases := []struct {
		name     string
		policies []*admissionregistrationv1.MutatingAdmissionPolicy
		bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
		params   []*corev1.ConfigMap
		obj      *appsv1.Deployment
		check    func(t *testing.T, d *appsv1.Deployment)
		wantErr  string
	}{
		{name: "apply configuration sets an annotation, keeping the rest",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never,
				applyConfig(`Object{metadata: Object.metadata{annotations: {"mutated-by": "admission-policy"}}}`))},
			obj: deployment("prod", 1, map[string]string{"app": "web"}),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if d.Annotations["mutated-by"] != "admission-policy" || d.Labels["app"] != "web" || *d.Spec.Replicas != 1 {
					t.Errorf("got annotations %v labels %v replicas %d", d.Annotations, d.Labels, *d.Spec.Replicas)
				}
			}},
		{name: "apply configuration sets a scalar of the spec",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never, applyConfig(`Object{spec: Object.spec{replicas: 1337}}`))},
			obj:      deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if *d.Spec.Replicas != 1337 {
					t.Errorf("replicas = %d, want 1337", *d.Spec.Replicas)
				}
			}},
		{name: "apply configuration merges a list by its keys",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never,
				applyConfig(`Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: "app", imagePullPolicy: "Always"}]}}}}`))},
			obj: func() *appsv1.Deployment {
				d := deployment("prod", 1, nil)
				d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "busybox"}, {Name: "side", Image: "pause"}}
				return d
			}(),
			check: func(t *testing.T, d *appsv1.Deployment) {
				cs := d.Spec.Template.Spec.Containers
				if len(cs) != 2 || cs[0].Image != "busybox" || cs[0].ImagePullPolicy != corev1.PullAlways || cs[1].ImagePullPolicy != "" {
					t.Errorf("containers = %+v", cs)
				}
			}},
		{name: "apply configuration of an atomic struct is refused",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never,
				applyConfig(`Object{spec: Object.spec{selector: Object.spec.selector{matchLabels: {"a": "b"}}}}`))},
			obj:     deployment("prod", 1, nil),
			wantErr: "policy 'p' with binding 'b' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: spec.selector"},
		{name: "type names must follow the field path",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never, applyConfig(`Object{spec: Object.metadata{replicas: 2}}`))},
			obj:      deployment("prod", 1, nil),
			wantErr:  `type mismatch: unexpected type name "Object.metadata", expected "Object.spec"`},
		{name: "json patch adds an escaped label key",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never,
				jsonPatchMutation(`[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("example.com/env"), value: "test"}]`))},
			obj: deployment("prod", 1, map[string]string{"app": "web"}),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if d.Labels["example.com/env"] != "test" || d.Labels["app"] != "web" {
					t.Errorf("labels = %v", d.Labels)
				}
			}},
		{name: "json patch whose test fails leaves the object",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never,
				jsonPatchMutation(`[JSONPatch{op: "test", path: "/spec/replicas", value: 5}, JSONPatch{op: "replace", path: "/spec/replicas", value: 6}]`))},
			obj: deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if *d.Spec.Replicas != 1 {
					t.Errorf("replicas = %d, want 1", *d.Spec.Replicas)
				}
			}},
		{name: "json patch whose test holds applies",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never,
				jsonPatchMutation(`[JSONPatch{op: "test", path: "/spec/replicas", value: 1}, JSONPatch{op: "replace", path: "/spec/replicas", value: 6}]`))},
			obj: deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if *d.Spec.Replicas != 6 {
					t.Errorf("replicas = %d, want 6", *d.Spec.Replicas)
				}
			}},
		{name: "a bad json patch path fails the request",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("p", never,
				jsonPatchMutation(`[JSONPatch{op: "replace", path: "/spec/nothing/here", value: 6}]`))},
			obj:     deployment("prod", 1, nil),
			wantErr: "policy 'p' with binding 'b' denied request: JSON Patch:"},
		{name: "failurePolicy Ignore admits unchanged",
			policies: func() []*admissionregistrationv1.MutatingAdmissionPolicy {
				p := mutatingPolicy("p", never, jsonPatchMutation(`[JSONPatch{op: "replace", path: "/spec/nothing/here", value: 6}]`))
				p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
				return []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			}(),
			obj: deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if *d.Spec.Replicas != 1 {
					t.Errorf("replicas = %d", *d.Spec.Replicas)
				}
			}},
		{name: "match condition false skips",
			policies: func() []*admissionregistrationv1.MutatingAdmissionPolicy {
				p := mutatingPolicy("p", never, applyConfig(`Object{spec: Object.spec{replicas: 9}}`))
				p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "big", Expression: "object.spec.replicas > 3"}}
				return []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			}(),
			obj: deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if *d.Spec.Replicas != 1 {
					t.Errorf("replicas = %d", *d.Spec.Replicas)
				}
			}},
		{name: "params and variables feed the mutation",
			policies: func() []*admissionregistrationv1.MutatingAdmissionPolicy {
				p := mutatingPolicy("p", never, applyConfig(`Object{spec: Object.spec{replicas: variables.want}}`))
				p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "want", Expression: "int(params.data.replicas)"}}
				return []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			}(),
			bindings: func() []*admissionregistrationv1.MutatingAdmissionPolicyBinding {
				b := mutatingBinding("b", "p")
				b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "sizes", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
				return []*admissionregistrationv1.MutatingAdmissionPolicyBinding{b}
			}(),
			params: []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "sizes", Namespace: "prod"}, Data: map[string]string{"replicas": "4"}}},
			obj:    deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if *d.Spec.Replicas != 4 {
					t.Errorf("replicas = %d, want 4", *d.Spec.Replicas)
				}
			}},
		{name: "missing param with Deny refuses",
			policies: func() []*admissionregistrationv1.MutatingAdmissionPolicy {
				p := mutatingPolicy("p", never, applyConfig(`Object{spec: Object.spec{replicas: 2}}`))
				p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				return []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			}(),
			bindings: func() []*admissionregistrationv1.MutatingAdmissionPolicyBinding {
				b := mutatingBinding("b", "p")
				b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "absent", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
				return []*admissionregistrationv1.MutatingAdmissionPolicyBinding{b}
			}(),
			obj:     deployment("prod", 1, nil),
			wantErr: "failed to configure binding: no params found"},
		{name: "IfNeeded policy runs again after a later change",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("a", ifNeeded, applyConfig(sawB)), mutatingPolicy("b", never, applyConfig(addB))},
			bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{mutatingBinding("ba", "a"), mutatingBinding("bb", "b")},
			obj:      deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if d.Annotations["a"] != "saw-b" || d.Labels["b"] != "yes" {
					t.Errorf("annotations %v labels %v, want a=saw-b and b=yes", d.Annotations, d.Labels)
				}
			}},
		{name: "Never policy does not run again",
			policies: []*admissionregistrationv1.MutatingAdmissionPolicy{mutatingPolicy("a", never, applyConfig(sawB)), mutatingPolicy("b", never, applyConfig(addB))},
			bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{mutatingBinding("ba", "a"), mutatingBinding("bb", "b")},
			obj:      deployment("prod", 1, nil),
			check: func(t *testing.T, d *appsv1.Deployment) {
				if d.Annotations["a"] != "no-b" {
					t.Errorf("annotations %v, want a=no-b", d.Annotations)
				}
			}},
	}
	deployments := registryRow(t, "apps", "deployments")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bindings := tc.bindings
			if bindings == nil {
				bindings = []*admissionregistrationv1.MutatingAdmissionPolicyBinding{mutatingBinding("b", "p")}
			}
			l := &fakeMutatingLookups{fakeLookups: &fakeLookups{configMaps: tc.params, namespaces: map[string]*corev1.Namespace{
				"prod": {ObjectMeta: metav1.ObjectMeta{Name: "prod"}}}}, mpolicies: tc.policies, mbindings: bindings}
			obj := tc.obj.DeepCopy()
			// Through the chain, whose reinvocation pass reruns IfNeeded policies.
			err := apiserver.AdmitMutating(context.Background(), []apiserver.Admitter{NewMutating(l)}, apiserver.AdmissionAttributes{Op: apiserver.OpCreate,
				Resource: deployments, Object: obj, ApplyTypes: func() managedfields.TypeConverter { return builtinTypes }})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if apierrors.ReasonForError(err) != metav1.StatusReasonInvalid || err.(apierrors.APIStatus).Status().Code != http.StatusForbidden {
					t.Errorf("status = %+v, want upstream's 403 with reason Invalid", err.(apierrors.APIStatus).Status())
				}
				if !equalDeployments(obj, tc.obj) {
					t.Errorf("a refused request changed the object: %+v", obj)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			tc.check(t, obj)
		})
	}
}

func equalDeployments(a, b *appsv1.Deployment) bool {
	return *a.Spec.Replicas == *b.Spec.Replicas && len(a.Labels) == len(b.Labels) && len(a.Annotations) == len(b.Annotations)
}

func TestMutatingAdmit_DeleteAndExemptResources_NotMutated(t *testing.T) {
	l := &fakeMutatingLookups{fakeLookups: &fakeLookups{}, mpolicies: []*admissionregistrationv1.MutatingAdmissionPolicy{
		mutatingPolicy("p", admissionregistrationv1.NeverReinvocationPolicy, applyConfig(`Object{spec: Object.spec{replicas: 7}}`))},
		mbindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{mutatingBinding("b", "p")}}
	obj := deployment("prod", 1, nil)
	err := NewMutating(l).Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Resource: registryRow(t, "apps", "deployments"),
		Object: obj, ApplyTypes: func() managedfields.TypeConverter { return builtinTypes }})
	if err != nil || *obj.Spec.Replicas != 1 {
		t.Errorf("delete: err %v, replicas %d", err, *obj.Spec.Replicas)
	}
}

func TestCompileMutatingErrors_BadExpressions_NamedByField(t *testing.T) {
	cases := []struct {
		name     string
		mutation admissionregistrationv1.Mutation
		wantPath string
		wantMsg  string
	}{
		{"apply configuration must give an Object", applyConfig(`"x"`), "spec.mutations[0].applyConfiguration.expression", "must evaluate to Object"},
		{"json patch must give a list of JSONPatch", jsonPatchMutation(`[1]`), "spec.mutations[0].jsonPatch.expression", "must evaluate to list(JSONPatch)"},
		{"syntax error", applyConfig(`Object{`), "spec.mutations[0].applyConfiguration.expression", "compilation failed"},
		{"unknown JSONPatch field", jsonPatchMutation(`[JSONPatch{op: "add", bogus: 1}]`), "spec.mutations[0].jsonPatch.expression", "compilation failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mutatingPolicy("p", admissionregistrationv1.NeverReinvocationPolicy, tc.mutation)
			errs := CompileMutatingErrors(&p.Spec, field.NewPath("spec"))
			if len(errs) != 1 || errs[0].Field != tc.wantPath || !strings.Contains(errs[0].Error(), tc.wantMsg) {
				t.Fatalf("errs = %v, want one at %s containing %q", errs, tc.wantPath, tc.wantMsg)
			}
		})
	}
	ok := mutatingPolicy("p", admissionregistrationv1.NeverReinvocationPolicy,
		applyConfig(`Object{metadata: Object.metadata{labels: {"a": "b"}}}`),
		jsonPatchMutation(`[JSONPatch{op: "remove", path: "/metadata/labels/" + jsonpatch.escapeKey("a/b~c")}]`))
	if errs := CompileMutatingErrors(&ok.Spec, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("valid policy refused: %v", errs)
	}
}
