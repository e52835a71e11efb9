package printers

import (
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kindCase is one object of a kind, with the header and cells expected.
type kindCase struct {
	name   string
	gk     schema.GroupKind
	header string
	obj    runtime.Object
	want   []interface{}
}

func runKindCases(t *testing.T, tests []kindCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := For(tt.gk)
			if got := header(p); got != tt.header {
				t.Errorf("header %q, want %q", got, tt.header)
			}
			assertCells(t, tt.gk, tt.obj, tt.want)
		})
	}
}

func TestRBACBindingCells(t *testing.T) {
	subjects := []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: "alice"},
		{Kind: rbacv1.UserKind, Name: "bob"},
		{Kind: rbacv1.GroupKind, Name: "system:masters"},
		{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "coredns"},
		{Kind: "Other", Name: "ignored"},
	}
	rbac := "rbac.authorization.k8s.io"
	bindingHeader := "Name;Role;Age;*Users;*Groups;*ServiceAccounts"
	runKindCases(t, []kindCase{
		{"role binding with every subject kind", schema.GroupKind{Group: rbac, Kind: "RoleBinding"}, bindingHeader,
			&rbacv1.RoleBinding{ObjectMeta: objMeta("rb", time.Hour), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "reader"}, Subjects: subjects},
			[]interface{}{"rb", "Role/reader", "60m", "alice, bob", "system:masters", "kube-system/coredns"}},
		{"cluster role binding without subjects", schema.GroupKind{Group: rbac, Kind: "ClusterRoleBinding"}, bindingHeader,
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crb", CreationTimestamp: ago(time.Hour)}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}},
			[]interface{}{"crb", "ClusterRole/cluster-admin", "60m", "", "", ""}},
	})
}

func TestClusterScopedAndPolicyKindsCells(t *testing.T) {
	never := corev1.PreemptNever
	runKindCases(t, []kindCase{
		{"lease with holder", schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, "Name;Holder;Age",
			&coordinationv1.Lease{ObjectMeta: objMeta("kube-scheduler", time.Hour), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("server-1_abc")}},
			[]interface{}{"kube-scheduler", "server-1_abc", "60m"}},
		{"lease without holder", schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, "Name;Holder;Age",
			&coordinationv1.Lease{ObjectMeta: objMeta("l", time.Hour)},
			[]interface{}{"l", "", "60m"}},
		{"pdb with min available", schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}, "Name;Min Available;Max Unavailable;Allowed Disruptions;Age",
			&policyv1.PodDisruptionBudget{ObjectMeta: objMeta("web", time.Hour), Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(2))}, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}},
			[]interface{}{"web", "2", "N/A", int64(1), "60m"}},
		{"pdb with max unavailable percent", schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}, "Name;Min Available;Max Unavailable;Allowed Disruptions;Age",
			&policyv1.PodDisruptionBudget{ObjectMeta: objMeta("web", time.Hour), Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr(intstr.FromString("25%"))}},
			[]interface{}{"web", "N/A", "25%", int64(0), "60m"}},
		{"priority class", schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}, "Name;Value;Global-Default;Age;PreemptionPolicy",
			&schedulingv1.PriorityClass{ObjectMeta: objMeta("system-node-critical", time.Hour), Value: 2000001000, GlobalDefault: false, PreemptionPolicy: &never},
			[]interface{}{"system-node-critical", int64(2000001000), false, "60m", "Never"}},
		{"priority class without policy", schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}, "Name;Value;Global-Default;Age;PreemptionPolicy",
			&schedulingv1.PriorityClass{ObjectMeta: objMeta("default", time.Hour), Value: 0, GlobalDefault: true},
			[]interface{}{"default", int64(0), true, "60m", ""}},
		{"runtime class", schema.GroupKind{Group: "node.k8s.io", Kind: "RuntimeClass"}, "Name;Handler;Age",
			&nodev1.RuntimeClass{ObjectMeta: objMeta("gvisor", time.Hour), Handler: "runsc"},
			[]interface{}{"gvisor", "runsc", "60m"}},
	})
}

func TestCertificateSigningRequestCells(t *testing.T) {
	gk := schema.GroupKind{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}
	header := "Name;Age;SignerName;Requestor;RequestedDuration;Condition"
	cond := func(ts ...certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
		out := make([]certificatesv1.CertificateSigningRequestCondition, len(ts))
		for i, t := range ts {
			out[i] = certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue}
		}
		return out
	}
	csr := func(conds []certificatesv1.CertificateSigningRequestCondition, cert []byte) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: objMeta("csr-1", time.Hour),
			Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: "kubernetes.io/kube-apiserver-client-kubelet", Username: "system:node:n1", ExpirationSeconds: ptr(int32(86400))},
			Status:     certificatesv1.CertificateSigningRequestStatus{Conditions: conds, Certificate: cert},
		}
	}
	row := func(condition string) []interface{} {
		return []interface{}{"csr-1", "60m", "kubernetes.io/kube-apiserver-client-kubelet", "system:node:n1", "24h", condition}
	}
	runKindCases(t, []kindCase{
		{"pending", gk, header, csr(nil, nil), row("Pending")},
		{"approved and issued", gk, header, csr(cond(certificatesv1.CertificateApproved), []byte("pem")), row("Approved,Issued")},
		{"denied wins over approved", gk, header, csr(cond(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied), nil), row("Denied")},
		{"approved but failed", gk, header, csr(cond(certificatesv1.CertificateApproved, certificatesv1.CertificateFailed), nil), row("Approved,Failed")},
		{"no signer or duration", gk, header, &certificatesv1.CertificateSigningRequest{ObjectMeta: objMeta("c", time.Hour)},
			[]interface{}{"c", "60m", "<none>", "", "<none>", "Pending"}},
	})
}

func TestAdmissionRegistrationCells(t *testing.T) {
	group := "admissionregistration.k8s.io"
	policy := "Name;Validations;ParamKind;Age"
	binding := "Name;PolicyName;ParamRef;Age"
	bindingOf := func(ref *admissionregistrationv1.ParamRef) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: objMeta("b", time.Hour), Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ParamRef: ref}}
	}
	runKindCases(t, []kindCase{
		{"mutating webhooks", schema.GroupKind{Group: group, Kind: "MutatingWebhookConfiguration"}, "Name;Webhooks;Age",
			&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: objMeta("m", time.Hour), Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a"}, {Name: "b"}}},
			[]interface{}{"m", int64(2), "60m"}},
		{"validating webhooks", schema.GroupKind{Group: group, Kind: "ValidatingWebhookConfiguration"}, "Name;Webhooks;Age",
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: objMeta("v", time.Hour)},
			[]interface{}{"v", int64(0), "60m"}},
		{"policy with param kind", schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicy"}, policy,
			&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: objMeta("p", time.Hour), Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}, Validations: []admissionregistrationv1.Validation{{Expression: "true"}}}},
			[]interface{}{"p", int64(1), "v1/ConfigMap", "60m"}},
		{"policy without param kind", schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicy"}, policy,
			&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: objMeta("p", time.Hour)},
			[]interface{}{"p", int64(0), "<unset>", "60m"}},
		{"binding to a namespaced param", schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicyBinding"}, binding,
			bindingOf(&admissionregistrationv1.ParamRef{Namespace: "ns", Name: "cfg"}), []interface{}{"b", "p", "ns/cfg", "60m"}},
		{"binding to a param in any namespace", schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicyBinding"}, binding,
			bindingOf(&admissionregistrationv1.ParamRef{Name: "cfg"}), []interface{}{"b", "p", "*/cfg", "60m"}},
		{"binding by selector", schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicyBinding"}, binding,
			bindingOf(&admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}), []interface{}{"b", "p", (&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}).String(), "60m"}},
		{"binding without param", schema.GroupKind{Group: group, Kind: "ValidatingAdmissionPolicyBinding"}, binding,
			bindingOf(nil), []interface{}{"b", "p", "<unset>", "60m"}},
		{"mutating policy with param kind", schema.GroupKind{Group: group, Kind: "MutatingAdmissionPolicy"}, "Name;Mutations;ParamKind;Age",
			&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: objMeta("m", time.Hour), Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}, Mutations: []admissionregistrationv1.Mutation{{}, {}}}},
			[]interface{}{"m", int64(2), "v1/ConfigMap", "60m"}},
		{"mutating binding to a namespaced param", schema.GroupKind{Group: group, Kind: "MutatingAdmissionPolicyBinding"}, binding,
			&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: objMeta("mb", time.Hour), Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
				PolicyName: "m", ParamRef: &admissionregistrationv1.ParamRef{Namespace: "ns", Name: "cfg"}}},
			[]interface{}{"mb", "m", "ns/cfg", "60m"}},
	})
}
