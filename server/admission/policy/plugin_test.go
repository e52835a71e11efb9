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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/registry"
)

// fakeLookups serves policies, bindings, namespaces and ConfigMap params
// from memory.
type fakeLookups struct {
	policies   []*admissionregistrationv1.ValidatingAdmissionPolicy
	bindings   []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	namespaces map[string]*corev1.Namespace
	configMaps []*corev1.ConfigMap
}

func (f *fakeLookups) ValidatingAdmissionPolicies(context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	return append([]*admissionregistrationv1.ValidatingAdmissionPolicy(nil), f.policies...), nil
}

func (f *fakeLookups) ValidatingAdmissionPolicyBindings(context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	return f.bindings, nil
}

func (f *fakeLookups) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	return f.namespaces[name], nil
}

var configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")

func (f *fakeLookups) ParamScope(gvk schema.GroupVersionKind) (bool, bool) {
	return true, gvk == configMapGVK
}

func (f *fakeLookups) GetParam(_ context.Context, _ schema.GroupVersionKind, ns, name string) (runtime.Object, error) {
	for _, cm := range f.configMaps {
		if cm.Namespace == ns && cm.Name == name {
			return cm, nil
		}
	}
	return nil, nil
}

func (f *fakeLookups) ListParams(_ context.Context, _ schema.GroupVersionKind, ns string, sel labels.Selector) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, cm := range f.configMaps {
		if (ns == "" || cm.Namespace == ns) && sel.Matches(labels.Set(cm.Labels)) {
			out = append(out, cm)
		}
	}
	return out, nil
}

func (f *fakeLookups) Served(gvr schema.GroupVersionResource) bool {
	return gvr.Group == "apps" && gvr.Version == "v1"
}

type recordedWarnings []string

func (w *recordedWarnings) AddWarning(msg string) { *w = append(*w, msg) }

func registryRow(t *testing.T, group, name string) *registry.Resource {
	t.Helper()
	for _, r := range registry.Builtin(registry.Hooks{}) {
		if r.Group == group && r.Name == name {
			return r
		}
	}
	t.Fatalf("no resource %s/%s", group, name)
	return nil
}

// deploymentPolicy matches creates and updates of apps/v1 deployments.
func deploymentPolicy(name string, mutate func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Generation: 1},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 3"}},
		},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func binding(name, policyName string, actions []admissionregistrationv1.ValidationAction, mutate func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec)) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policyName, ValidationActions: actions},
	}
	if mutate != nil {
		mutate(&b.Spec)
	}
	return b
}

var deny = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}

func deployment(ns string, replicas int32, lbls map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: lbls}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
}

func withParams(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
	s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	s.Validations = []admissionregistrationv1.Validation{{
		Expression:        "object.spec.replicas <= int(params.data.maxReplicas)",
		MessageExpression: "'replicas ' + string(object.spec.replicas) + ' over ' + params.data.maxReplicas",
	}}
}

func paramRef(name string, action admissionregistrationv1.ParameterNotFoundActionType) func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
	return func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ParamRef = &admissionregistrationv1.ParamRef{Name: name, ParameterNotFoundAction: ptr.To(action)}
	}
}

func TestAdmit_Requests_DecidedAsUpstream(t *testing.T) {
	namespaces := map[string]*corev1.Namespace{
		"prod": {ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
		"dev":  {ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"env": "dev"}}},
	}
	limits := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "prod"}, Data: map[string]string{"maxReplicas": "2"}}
	deployments := registryRow(t, "apps", "deployments")
	replicaSets := registryRow(t, "apps", "replicasets")
	cases := []struct {
		name     string
		policy   *admissionregistrationv1.ValidatingAdmissionPolicy
		binding  *admissionregistrationv1.ValidatingAdmissionPolicyBinding
		res      *registry.Resource
		obj      runtime.Object
		wantErr  string // substring of the error; "" admits
		wantCode int32
		wantWarn string
	}{
		{name: "valid object admitted", policy: deploymentPolicy("p", nil), binding: binding("b", "p", deny, nil),
			res: deployments, obj: deployment("prod", 3, nil)},
		{name: "false validation denied with the failed expression", policy: deploymentPolicy("p", nil), binding: binding("b", "p", deny, nil),
			res: deployments, obj: deployment("prod", 4, nil),
			wantErr:  `deployments.apps "web" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed expression: object.spec.replicas <= 3`,
			wantCode: http.StatusUnprocessableEntity},
		{name: "other resource not matched", policy: deploymentPolicy("p", nil), binding: binding("b", "p", deny, nil),
			res: replicaSets, obj: &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "prod"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](9)}}},
		{name: "binding without its policy ignored", policy: deploymentPolicy("other", nil), binding: binding("b", "p", deny, nil),
			res: deployments, obj: deployment("prod", 9, nil)},
		{name: "namespace selector of the binding excludes", policy: deploymentPolicy("p", nil),
			binding: binding("b", "p", deny, func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
				s.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
			}),
			res: deployments, obj: deployment("dev", 9, nil)},
		{name: "namespace selector of the binding includes", policy: deploymentPolicy("p", nil),
			binding: binding("b", "p", deny, func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
				s.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
			}),
			res: deployments, obj: deployment("prod", 9, nil), wantErr: "denied request"},
		{name: "object selector excludes", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "yes"}}
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 9, nil)},
		{name: "exclude rule wins", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ExcludeResourceRules = []admissionregistrationv1.NamedRuleWithOperations{{ResourceNames: []string{"web"}, RuleWithOperations: s.MatchConstraints.ResourceRules[0].RuleWithOperations}}
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 9, nil)},
		{name: "match condition false skips", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "labelled", Expression: "'checked' in object.metadata.labels"}}
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 9, map[string]string{"other": "x"})},
		{name: "namespaceObject and request seen", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = []admissionregistrationv1.Validation{{Expression: "namespaceObject.metadata.labels.env != 'prod' || request.userInfo.username == 'admin'", Message: "only admin in prod"}}
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 1, nil), wantErr: "denied request: only admin in prod"},
		{name: "variables evaluated lazily in order", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}, {Name: "odd", Expression: "variables.replicas % 2 == 1"}}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "variables.odd", MessageExpression: "'even: ' + string(variables.replicas)"}}
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 2, nil), wantErr: "denied request: even: 2"},
		{name: "reason sets the code", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Reason = ptr.To(metav1.StatusReasonForbidden)
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 4, nil), wantErr: "denied request", wantCode: http.StatusForbidden},
		{name: "param within limit admitted", policy: deploymentPolicy("p", withParams), binding: binding("b", "p", deny, paramRef("limits", admissionregistrationv1.DenyAction)),
			res: deployments, obj: deployment("prod", 2, nil)},
		{name: "param over limit denied with messageExpression", policy: deploymentPolicy("p", withParams), binding: binding("b", "p", deny, paramRef("limits", admissionregistrationv1.DenyAction)),
			res: deployments, obj: deployment("prod", 3, nil), wantErr: "denied request: replicas 3 over 2"},
		{name: "missing param with Deny refused", policy: deploymentPolicy("p", withParams), binding: binding("b", "p", deny, paramRef("absent", admissionregistrationv1.DenyAction)),
			res: deployments, obj: deployment("prod", 1, nil),
			wantErr: "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"},
		{name: "missing param with Allow admitted", policy: deploymentPolicy("p", withParams), binding: binding("b", "p", deny, paramRef("absent", admissionregistrationv1.AllowAction)),
			res: deployments, obj: deployment("prod", 9, nil)},
		{name: "param selector in the request namespace", policy: deploymentPolicy("p", withParams),
			binding: binding("b", "p", deny, func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
				s.ParamRef = &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)}
			}), res: deployments, obj: deployment("prod", 3, nil), wantErr: "replicas 3 over 2"},
		{name: "warn admits and warns", policy: deploymentPolicy("p", nil), binding: binding("b", "p", []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}, nil),
			res: deployments, obj: deployment("prod", 4, nil), wantWarn: "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': failed expression: object.spec.replicas <= 3"},
		{name: "audit only admits", policy: deploymentPolicy("p", nil), binding: binding("b", "p", []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}, nil),
			res: deployments, obj: deployment("prod", 4, nil)},
		{name: "evaluation error fails closed", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "object.spec.missing == 1"
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 1, nil), wantErr: "no such key"},
		{name: "evaluation error ignored with failurePolicy Ignore", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "object.spec.missing == 1"
			s.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}), binding: binding("b", "p", deny, nil), res: deployments, obj: deployment("prod", 1, nil)},
		{name: "policy kinds exempt", policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].Rule = admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}
			s.Validations[0].Expression = "false"
		}), binding: binding("b", "p", deny, nil), res: &registry.Resource{Group: "admissionregistration.k8s.io", Version: "v1", Name: "validatingadmissionpolicies", Kind: "ValidatingAdmissionPolicy"},
			obj: deploymentPolicy("x", nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLookups{policies: []*admissionregistrationv1.ValidatingAdmissionPolicy{tc.policy},
				bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{tc.binding}, namespaces: namespaces,
				configMaps: []*corev1.ConfigMap{limits}}
			var warnings recordedWarnings
			p := New(l)
			p.warner = func(context.Context) apiserver.Warner { return &warnings }
			err := p.Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: tc.res, Object: tc.obj, User: &auth.User{Name: "someone"}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("denied: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantCode != 0 {
				var st apierrors.APIStatus
				if !errorsAs(err, &st) || st.Status().Code != tc.wantCode {
					t.Fatalf("error %v, want code %d", err, tc.wantCode)
				}
			}
			if tc.wantWarn != "" && (len(warnings) != 1 || warnings[0] != tc.wantWarn) {
				t.Fatalf("warnings %q, want %q", warnings, tc.wantWarn)
			}
			if tc.wantWarn == "" && len(warnings) > 0 {
				t.Fatalf("unexpected warnings %q", warnings)
			}
		})
	}
}

func errorsAs(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

func TestCompile_CachedPerGeneration(t *testing.T) {
	p := New(&fakeLookups{})
	pol := deploymentPolicy("p", nil)
	first := p.compile(pol)
	if again := p.compile(pol); again != first {
		t.Fatal("same generation compiled twice")
	}
	next := pol.DeepCopy()
	next.Generation = 2
	next.Spec.Validations[0].Expression = "object.spec.replicas <= 5"
	if p.compile(next) == first {
		t.Fatal("new generation served the old programs")
	}
}

func TestCompileErrors_BadExpressions_ReportedAtTheirPaths(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)
		want   string
	}{
		{name: "syntax", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "object.spec.replicas >"
		},
			want: "spec.validations[0].expression: Invalid value: \"object.spec.replicas >\": compilation failed: ERROR: <input>:1:23"},
		{name: "not bool", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.Validations[0].Expression = "'x'" },
			want: "spec.validations[0].expression: Invalid value: \"'x'\": must evaluate to bool but got string"},
		{name: "params without paramKind", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].Expression = "params.x == 1"
		},
			want: "undeclared reference to 'params'"},
		{name: "message expression not string", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations[0].MessageExpression = "1"
		},
			want: "spec.validations[0].messageExpression: Invalid value: \"1\": must evaluate to string but got int"},
		{name: "variable before its declaration", mutate: func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "a", Expression: "variables.b"}, {Name: "b", Expression: "1"}}
		}, want: "spec.variables[0].expression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := deploymentPolicy("p", tc.mutate)
			errs := CompileErrors(&pol.Spec, field.NewPath("spec"))
			if len(errs) == 0 {
				t.Fatal("compiled")
			}
			if got := errs.ToAggregate().Error(); !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
	if errs := CompileErrors(&deploymentPolicy("p", withParams).Spec, field.NewPath("spec")); len(errs) > 0 {
		t.Fatalf("valid policy refused: %v", errs)
	}
}
