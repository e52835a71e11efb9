package policy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// builtinKinds knows deployments and ConfigMaps.
type builtinKinds struct{}

func (builtinKinds) KindFor(_ context.Context, gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool) {
	if gvr == appsv1.SchemeGroupVersion.WithResource("deployments") {
		return appsv1.SchemeGroupVersion.WithKind("Deployment"), true
	}
	return schema.GroupVersionKind{}, false
}

func (builtinKinds) Schema(_ context.Context, gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, bool) {
	switch gvk {
	case appsv1.SchemeGroupVersion.WithKind("Deployment"):
		return GoTypeSchema(&appsv1.Deployment{}), true
	case configMapGVK:
		return GoTypeSchema(&corev1.ConfigMap{}), true
	}
	return nil, false
}

func TestTypeCheck_Expressions_WarnedAsUpstream(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)
		want   map[string]string // fieldRef -> substring of the warning
	}{
		{name: "well typed", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = []admissionregistrationv1.Validation{{Expression: "object.spec.replicas > 1 && object.metadata.labels.all(k, k != '')",
				MessageExpression: "'got ' + string(object.spec.replicas)"}}
		}},
		{name: "type confusion", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = []admissionregistrationv1.Validation{{Expression: "object.spec.replicas > '1'", MessageExpression: "'wants replicas > 1, got ' + object.spec.replicas"}}
		}, want: map[string]string{
			"spec.validations[0].expression":        "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'",
			"spec.validations[0].messageExpression": "found no matching overload for '_+_' applied to '(string, int)'",
		}},
		{name: "unknown field", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = []admissionregistrationv1.Validation{{Expression: "object.spec.replica > 1"}}
		}, want: map[string]string{"spec.validations[0].expression": "undefined field 'replica'"}},
		{name: "typed params and variables", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			withParams(s)
			s.Variables = []admissionregistrationv1.Variable{{Name: "max", Expression: "params.data.maxReplicas"}}
			s.Validations = append(s.Validations, admissionregistrationv1.Validation{Expression: "variables.max > 1"})
		}, want: map[string]string{"spec.validations[1].expression": "found no matching overload for '_>_' applied to '(string, int)'"}},
		{name: "authorizer typed", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = []admissionregistrationv1.Validation{
				{Expression: "authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('create').allowed()"},
				{Expression: "authorizer.requestResource.check('x').reason() == 1"},
			}
		}, want: map[string]string{"spec.validations[1].expression": "found no matching overload for '_==_' applied to '(string, int)'"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := typeCheck(context.Background(), deploymentPolicy("p", tc.mutate), builtinKinds{})
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %+v, want %d", got, len(tc.want))
			}
			for _, w := range got {
				if sub, ok := tc.want[w.FieldRef]; !ok || !strings.Contains(w.Warning, sub) {
					t.Errorf("warning %s: %q, want one containing %q", w.FieldRef, w.Warning, sub)
				}
			}
		})
	}
}
