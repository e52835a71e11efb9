package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"skiff/server/admission/policy"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/audit"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/validation"
	"skiff/store"
)

type auditEvents struct {
	mu     sync.Mutex
	events []audit.Event
}

func (a *auditEvents) ProcessEvent(ev *audit.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var c audit.Event
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, c)
	return nil
}

// completed is the ResponseComplete event of a create of resource/name.
func (a *auditEvents) completed(resource, name string) *audit.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.events {
		ev := &a.events[i]
		if ev.Stage == audit.StageResponseComplete && ev.Verb == "create" && ev.ObjectRef != nil && ev.ObjectRef.Resource == resource && ev.ObjectRef.Name == name {
			return ev
		}
	}
	return nil
}

func TestPolicy_AuditBinding_AdmitsAndAnnotatesTheAuditEvent(t *testing.T) {
	ctx := context.Background()
	hooks := registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate, ValidateSubresource: validation.ValidateSubresource}
	pol, _, err := audit.ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"))
	if err != nil {
		t.Fatal(err)
	}
	events := &auditEvents{}
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Resources: registry.Policies(hooks), AuditPolicy: pol, AuditSink: events,
		Admission: func(store.Store) []apiserver.Admitter { return []apiserver.Admitter{policy.New(cacheLookups{&srv})} }})
	c := kubernetes.NewForConfigOrDie(srv.Config(nil))
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Data: map[string]string{"maxReplicas": "2"}}
	if _, err := c.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := replicasPolicy()
	p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(object.spec.replicas)"}}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "audit-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: p.Name,
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "ns", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}},
	}
	if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().Deployments("ns").Create(ctx, newDeployment("big", 3), metav1.CreateOptions{}); err != nil {
		t.Fatalf("an Audit binding refused the create: %v", err)
	}
	ev := events.completed("deployments", "big")
	if ev == nil {
		t.Fatal("no ResponseComplete event for the deployment's create")
	}
	var failures []map[string]any
	if err := json.Unmarshal([]byte(ev.Annotations["validation.policy.admission.k8s.io/validation_failure"]), &failures); err != nil {
		t.Fatalf("annotations %v: %v", ev.Annotations, err)
	}
	if len(failures) != 1 || failures[0]["message"] != "replicas 3 exceed 2" || failures[0]["policy"] != "max-replicas" ||
		failures[0]["binding"] != "audit-replicas" || failures[0]["expressionIndex"] != float64(0) {
		t.Errorf("validation failures %v", failures)
	}
	if got := ev.Annotations["max-replicas/replicas"]; got != "3" {
		t.Errorf("audit annotation max-replicas/replicas = %q, want 3 (annotations %v)", got, ev.Annotations)
	}
	if ev.ResponseStatus == nil || ev.ResponseStatus.Code != 201 || !strings.HasPrefix(ev.User.Username, "system:") {
		t.Errorf("event %+v", ev)
	}
}
