package policy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/admission/policy"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/validation"
	"skiff/store"
)

func (l cacheLookups) MutatingAdmissionPolicies(ctx context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	objs, err := l.list(ctx, "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", "", nil)
	var out []*admissionregistrationv1.MutatingAdmissionPolicy
	for _, o := range objs {
		out = append(out, o.(*admissionregistrationv1.MutatingAdmissionPolicy))
	}
	return out, err
}

func (l cacheLookups) MutatingAdmissionPolicyBindings(ctx context.Context) ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	objs, err := l.list(ctx, "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", "", nil)
	var out []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	for _, o := range objs {
		out = append(out, o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding))
	}
	return out, err
}

func startMutating(t *testing.T) kubernetes.Interface {
	t.Helper()
	hooks := registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource}
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Resources: registry.Policies(hooks), Admission: func(store.Store) []apiserver.Admitter {
		return []apiserver.Admitter{policy.NewMutating(cacheLookups{&srv})}
	}})
	return kubernetes.NewForConfigOrDie(rest.CopyConfig(srv.Config(nil)))
}

func replicasMutation(expr string) *admissionregistrationv1.MutatingAdmissionPolicy {
	return &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "set-replicas"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr}}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
}

// Through the API server: the plugin merges by the server's own schema
// (AdmissionAttributes.ApplyTypes), and the stored object is the mutated
// one, defaulted and validated after the mutation.
func TestMutatingPolicy_ThroughTheAPIServer_StoredObjectIsMutated(t *testing.T) {
	ctx := context.Background()
	c := startMutating(t)
	p, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx,
		replicasMutation(`Object{spec: Object.spec{replicas: 1337}, metadata: Object.metadata{annotations: {"mutated-by": "admission-policy"}}}`), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *p.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent {
		t.Errorf("defaults not set: %+v", p.Spec)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name}}
	if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got int32
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		d := newDeployment(fmt.Sprintf("web-%d", i), 1)
		created, err := c.AppsV1().Deployments("ns").Create(ctx, d, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got = *created.Spec.Replicas; got == 1337 {
			stored, err := c.AppsV1().Deployments("ns").Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil || *stored.Spec.Replicas != 1337 || stored.Annotations["mutated-by"] != "admission-policy" {
				t.Fatalf("stored %v, %v", stored, err)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("replicas = %d, never mutated to 1337", got)
}

func TestMutatingPolicy_InvalidSpecs_RefusedNamingTheField(t *testing.T) {
	ctx := context.Background()
	c := startMutating(t)
	cases := []struct {
		name   string
		mutate func(*admissionregistrationv1.MutatingAdmissionPolicy)
		want   string
	}{
		{"expression of the wrong type", func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
			p.Spec.Mutations[0].ApplyConfiguration.Expression = `"x"`
		}, `spec.mutations[0].applyConfiguration.expression: Invalid value: "\"x\"": must evaluate to Object`},
		{"no reinvocation policy", func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.ReinvocationPolicy = "" },
			"spec.reinvocationPolicy: Required value"},
		{"no mutations", func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.Mutations = nil },
			"spec.mutations: Required value: mutations must contain at least one item"},
		{"patch type without its member", func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
			p.Spec.Mutations[0].PatchType = admissionregistrationv1.PatchTypeJSONPatch
		}, "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch"},
		{"DELETE cannot be mutated", func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
		}, `spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := replicasMutation(`Object{spec: Object.spec{replicas: 2}}`)
			tc.mutate(p)
			_, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want Invalid with %q", err, tc.want)
			}
		})
	}
	list, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("refused policies stored: %v, %v", list, err)
	}
}
