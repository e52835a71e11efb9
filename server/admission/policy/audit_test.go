package policy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/audit"
	"skiff/server/auth"
)

var auditOnly = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}

func withAuditAnnotations(as ...admissionregistrationv1.AuditAnnotation) func(*admissionregistrationv1.ValidatingAdmissionPolicySpec) {
	return func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) { s.AuditAnnotations = as }
}

func TestAdmit_AuditActionAndAnnotations_AnnotateTheAuditEvent(t *testing.T) {
	prod := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}
	limits := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "prod", Labels: map[string]string{"limits": "yes"}}, Data: map[string]string{"maxReplicas": "2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "prod", Labels: map[string]string{"limits": "yes"}}, Data: map[string]string{"maxReplicas": "5"}},
	}
	byLabel := func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ParamRef = &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"limits": "yes"}},
			ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
	}
	cases := []struct {
		name     string
		policy   *admissionregistrationv1.ValidatingAdmissionPolicy
		binding  *admissionregistrationv1.ValidatingAdmissionPolicyBinding
		replicas int32
		wantErr  string            // "" admits
		want     map[string]string // the annotations, exactly
	}{
		// The value is encoding/json's, as upstream's (so "<" is \u003c).
		{name: "audit action admits and records the failure", policy: deploymentPolicy("p", nil), binding: binding("b", "p", auditOnly, nil), replicas: 4,
			want: map[string]string{validationFailureKey: `[{"message":"failed expression: object.spec.replicas \u003c= 3","policy":"p","binding":"b","expressionIndex":0,"validationActions":["Audit"]}]`}},
		{name: "passing validation records nothing", policy: deploymentPolicy("p", nil), binding: binding("b", "p", auditOnly, nil), replicas: 1,
			want: map[string]string{}},
		{name: "deny and audit: refused and recorded, index of the failed validation",
			policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.Validations = append([]admissionregistrationv1.Validation{{Expression: "true"}}, admissionregistrationv1.Validation{Expression: "object.spec.replicas < 2", Message: "too many"})
			}),
			binding:  binding("b", "p", []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Audit}, nil),
			replicas: 3, wantErr: "denied request: too many",
			want: map[string]string{validationFailureKey: `[{"message":"too many","policy":"p","binding":"b","expressionIndex":1,"validationActions":["Deny","Audit"]}]`}},
		{name: "audit annotations are keyed by the policy",
			policy: deploymentPolicy("p", withAuditAnnotations(
				admissionregistrationv1.AuditAnnotation{Key: "replicas", ValueExpression: "'replicas: ' + string(object.spec.replicas)"},
				admissionregistrationv1.AuditAnnotation{Key: "empty", ValueExpression: "'  '"},
				admissionregistrationv1.AuditAnnotation{Key: "none", ValueExpression: "null"},
			)),
			binding: binding("b", "p", deny, nil), replicas: 2,
			want: map[string]string{"p/replicas": "replicas: 2"}},
		{name: "annotations are written for a denied request too",
			policy:  deploymentPolicy("p", withAuditAnnotations(admissionregistrationv1.AuditAnnotation{Key: "who", ValueExpression: "request.userInfo.username"})),
			binding: binding("b", "p", deny, nil), replicas: 9, wantErr: "denied request",
			want: map[string]string{"p/who": "someone"}},
		{name: "distinct values of several params joined",
			policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				withParams(s)
				s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{
					{Key: "max", ValueExpression: "params.data.maxReplicas"},
					{Key: "same", ValueExpression: "'x'"},
				}
			}),
			binding: binding("b", "p", auditOnly, byLabel), replicas: 3,
			want: map[string]string{"p/max": "2, 5", "p/same": "x",
				validationFailureKey: `[{"message":"replicas 3 over 2","policy":"p","binding":"b","expressionIndex":0,"validationActions":["Audit"]}]`}},
		{name: "non-string value refuses under Fail",
			policy:  deploymentPolicy("p", withAuditAnnotations(admissionregistrationv1.AuditAnnotation{Key: "n", ValueExpression: "object.spec.replicas"})),
			binding: binding("b", "p", auditOnly, nil), replicas: 1,
			wantErr: "valueExpression 'object.spec.replicas' resulted in unsupported return type: int", want: map[string]string{}},
		{name: "evaluation error ignored under Ignore",
			policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
				s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "bad", ValueExpression: "object.spec.missing"}, {Key: "ok", ValueExpression: "'fine'"}}
			}),
			binding: binding("b", "p", deny, nil), replicas: 1, want: map[string]string{"p/ok": "fine"}},
		{name: "match condition false: no annotations",
			policy: deploymentPolicy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
				s.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "never", Expression: "false"}}
				s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "k", ValueExpression: "'v'"}}
			}),
			binding: binding("b", "p", auditOnly, nil), replicas: 9, want: map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLookups{policies: []*admissionregistrationv1.ValidatingAdmissionPolicy{tc.policy},
				bindings:   []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{tc.binding},
				namespaces: map[string]*corev1.Namespace{"prod": prod}, configMaps: limits}
			rec := audit.NewRecorder(audit.RequestConfig{Level: audit.LevelMetadata}, nil, audit.Event{})
			ctx := audit.WithRecorder(context.Background(), rec)
			err := New(l).Admit(ctx, apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: registryRow(t, "apps", "deployments"),
				Object: deployment("prod", tc.replicas, nil), User: &auth.User{Name: "someone"}})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("denied: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			got := rec.Event().Annotations
			if len(got) != len(tc.want) {
				t.Fatalf("annotations %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
