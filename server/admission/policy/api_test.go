package policy_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"skiff/server/admission/policy"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/server/validation"
	"skiff/store"
)

// cacheLookups reads what the plugin needs from the test server's watch
// cache once it has caught up with the store.
type cacheLookups struct{ srv **apitest.Server }

func (l cacheLookups) list(ctx context.Context, group, version, name, ns string, sel labels.Selector) ([]runtime.Object, error) {
	s := *l.srv
	if err := s.Storage.Cache().WaitCurrent(ctx); err != nil {
		return nil, err
	}
	res, ok := s.Registry.Lookup(group, version, name)
	if !ok {
		return nil, nil
	}
	entries, _, err := s.Storage.Cache().List(res, storage.Predicate{Namespace: ns, Label: sel})
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, len(entries))
	for i, e := range entries {
		out[i] = e.Obj
	}
	return out, nil
}

func (l cacheLookups) ValidatingAdmissionPolicies(ctx context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	objs, err := l.list(ctx, "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "", nil)
	var out []*admissionregistrationv1.ValidatingAdmissionPolicy
	for _, o := range objs {
		out = append(out, o.(*admissionregistrationv1.ValidatingAdmissionPolicy))
	}
	return out, err
}

func (l cacheLookups) ValidatingAdmissionPolicyBindings(ctx context.Context) ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	objs, err := l.list(ctx, "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "", nil)
	var out []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, o := range objs {
		out = append(out, o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding))
	}
	return out, err
}

func (l cacheLookups) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	objs, err := l.list(ctx, "", "v1", "namespaces", "", nil)
	for _, o := range objs {
		if ns := o.(*corev1.Namespace); ns.Name == name {
			return ns, nil
		}
	}
	return nil, err
}

func (l cacheLookups) ParamScope(gvk schema.GroupVersionKind) (bool, bool) {
	res, ok := (*l.srv).Registry.ForKind(gvk)
	return ok && res.Namespaced, ok
}

func (l cacheLookups) GetParam(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (runtime.Object, error) {
	objs, err := l.ListParams(ctx, gvk, ns, labels.Everything())
	for _, o := range objs {
		if o.(*corev1.ConfigMap).Name == name {
			return o, nil
		}
	}
	return nil, err
}

func (l cacheLookups) ListParams(ctx context.Context, gvk schema.GroupVersionKind, ns string, sel labels.Selector) ([]runtime.Object, error) {
	res, ok := (*l.srv).Registry.ForKind(gvk)
	if !ok {
		return nil, nil
	}
	return l.list(ctx, res.Group, res.Version, res.Name, ns, sel)
}

func (l cacheLookups) Served(gvr schema.GroupVersionResource) bool {
	_, ok := (*l.srv).Registry.Lookup(gvr.Group, gvr.Version, gvr.Resource)
	return ok
}

type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func start(t *testing.T) (kubernetes.Interface, *warnings) {
	t.Helper()
	hooks := registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource}
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Resources: registry.Policies(hooks), Admission: func(store.Store) []apiserver.Admitter {
		return []apiserver.Admitter{policy.New(cacheLookups{&srv})}
	}})
	w := &warnings{}
	cfg := srv.Config(nil)
	cfg.WarningHandler = w
	c := kubernetes.NewForConfigOrDie(rest.CopyConfig(cfg))
	return c, w
}

func replicasPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.replicas <= int(params.data.maxReplicas)",
				MessageExpression: "'replicas ' + string(object.spec.replicas) + ' exceed ' + params.data.maxReplicas",
			}},
		},
	}
}

func newDeployment(name string, replicas int32) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
	}}
}

func TestPolicy_ParamConfigMap_DeniesThenWarns(t *testing.T) {
	ctx := context.Background()
	c, w := start(t)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Data: map[string]string{"maxReplicas": "2"}}
	if _, err := c.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vaps := c.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	created, err := vaps.Create(ctx, replicasPolicy(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.FailurePolicy == nil || *created.Spec.FailurePolicy != admissionregistrationv1.Fail ||
		created.Spec.MatchConstraints.MatchPolicy == nil || *created.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent {
		t.Fatalf("policy not defaulted: %+v", created.Spec)
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max-replicas",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "ns", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	bindings := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if b, err = bindings.Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	deploys := c.AppsV1().Deployments("ns")
	_, err = deploys.Create(ctx, newDeployment("big", 3), metav1.CreateOptions{})
	want := "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: replicas 3 exceed 2"
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("create of 3 replicas: %v, want Invalid with %q", err, want)
	}
	if _, err := deploys.Create(ctx, newDeployment("small", 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create of 2 replicas: %v", err)
	}

	b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
	if _, err := bindings.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deploys.Create(ctx, newDeployment("warned", 5), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create with a Warn binding: %v", err)
	}
	wantWarn := "Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding': replicas 5 exceed 2"
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.msgs) != 1 || w.msgs[0] != wantWarn {
		t.Fatalf("warnings %q, want [%q]", w.msgs, wantWarn)
	}
}

func TestPolicy_InvalidSpecs_Refused(t *testing.T) {
	ctx := context.Background()
	c, _ := start(t)
	cases := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicy)
		want   string
	}{
		{name: "expression does not compile", mutate: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "object.spec.replicas >"
		}, want: `spec.validations[0].expression: Invalid value: "object.spec.replicas >": compilation failed: ERROR:`},
		{name: "no match constraints", mutate: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints = nil },
			want: "spec.matchConstraints: Required value"},
		{name: "no validations", mutate: func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations = nil },
			want: "spec.validations: Required value: validations or auditAnnotations must contain at least one item"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := replicasPolicy()
			tc.mutate(p)
			_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want Invalid with %q", err, tc.want)
			}
		})
	}
	bad := []struct {
		name string
		spec admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec
		want string
	}{
		{name: "no actions", spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p"},
			want: "spec.validationActions: Required value"},
		{name: "deny and warn", spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Deny", "Warn"}}, want: "must not contain both Deny and Warn"},
		{name: "param ref name and selector", spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{"Deny"},
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "x", Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)}},
			want: "spec.paramRef.name: Forbidden: name and selector are mutually exclusive"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: tc.spec}
			_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want Invalid with %q", err, tc.want)
			}
		})
	}
}
