package validation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateRBAC(t *testing.T) {
	runCreateCases(t, func() *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: objMeta("pod-reader"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	}, []errCase[*rbacv1.Role]{
		{"verbs required", func(r *rbacv1.Role) { r.Rules[0].Verbs = nil }, field.ErrorTypeRequired, "rules[0].verbs", "verbs must contain at least one value"},
		{"resources required", func(r *rbacv1.Role) { r.Rules[0].Resources = nil }, field.ErrorTypeRequired, "rules[0].resources", ""},
		{"roles cannot grant URLs", func(r *rbacv1.Role) {
			r.Rules[0] = rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}
		},
			field.ErrorTypeInvalid, "rules[0].nonResourceURLs", "namespaced rules cannot apply to non-resource URLs"},
		{"names must be path segments", func(r *rbacv1.Role) { r.Name = "a/b" }, field.ErrorTypeInvalid, "metadata.name", ""},
	})
	validBinding := func() *rbacv1.RoleBinding {
		return defaulted(&rbacv1.RoleBinding{ObjectMeta: objMeta("read-pods"),
			RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "jane"}, {Kind: "ServiceAccount", Name: "builder"}}})
	}
	runCreateCases(t, validBinding, []errCase[*rbacv1.RoleBinding]{
		{"role ref kind", func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "Group" }, field.ErrorTypeNotSupported, "roleRef.kind", ""},
		{"role ref name required", func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "" }, field.ErrorTypeRequired, "roleRef.name", ""},
		{"subject kind enum", func(b *rbacv1.RoleBinding) { b.Subjects[0].Kind = "Robot" }, field.ErrorTypeNotSupported, "subjects[0].kind", ""},
		{"user subjects in the RBAC group", func(b *rbacv1.RoleBinding) { b.Subjects[0].APIGroup = "example.com" },
			field.ErrorTypeNotSupported, "subjects[0].apiGroup", ""},
	})
	runUpdateCases(t, func() *rbacv1.RoleBinding { return stored(validBinding()) }, []updateCase[*rbacv1.RoleBinding]{
		{"subjects may change", func(b *rbacv1.RoleBinding) { b.Subjects = b.Subjects[:1] }, "", "", ""},
		{"role ref is fixed", func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "admin" }, field.ErrorTypeInvalid, "roleRef", "cannot change roleRef"},
	})
	runCreateCases(t, func() *rbacv1.ClusterRoleBinding {
		return defaulted(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins"},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "admins"}}})
	}, []errCase[*rbacv1.ClusterRoleBinding]{
		{"cluster bindings reference cluster roles", func(b *rbacv1.ClusterRoleBinding) { b.RoleRef.Kind = "Role" },
			field.ErrorTypeNotSupported, "roleRef.kind", ""},
		{"service account subject needs a namespace", func(b *rbacv1.ClusterRoleBinding) {
			b.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: "builder"}}
		}, field.ErrorTypeRequired, "subjects[0].namespace", ""},
	})
}

func TestValidateNetworking(t *testing.T) {
	runCreateCases(t, func() *networkingv1.NetworkPolicy {
		return defaulted(&networkingv1.NetworkPolicy{ObjectMeta: objMeta("allow-web"), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *webSelector(),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(80))}},
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
			}},
		}})
	}, []errCase[*networkingv1.NetworkPolicy]{
		{"peer required", func(n *networkingv1.NetworkPolicy) { n.Spec.Ingress[0].From[0] = networkingv1.NetworkPolicyPeer{} },
			field.ErrorTypeRequired, "spec.ingress[0].from[0]", "must specify a peer"},
		{"except inside the block", func(n *networkingv1.NetworkPolicy) {
			n.Spec.Ingress[0].From[0].IPBlock.Except = []string{"192.168.0.0/16"}
		},
			field.ErrorTypeInvalid, "spec.ingress[0].from[0].ipBlock.except[0]", "must be a strict subset of `cidr`"},
		{"end port after port", func(n *networkingv1.NetworkPolicy) { n.Spec.Ingress[0].Ports[0].EndPort = new(int32(79)) },
			field.ErrorTypeInvalid, "spec.ingress[0].ports[0].endPort", "must be greater than or equal to `port`"},
		{"policy type enum", func(n *networkingv1.NetworkPolicy) { n.Spec.PolicyTypes = []networkingv1.PolicyType{"Sideways"} },
			field.ErrorTypeNotSupported, "spec.policyTypes[0]", ""},
	})
	prefix := networkingv1.PathTypePrefix
	runCreateCases(t, func() *networkingv1.Ingress {
		return defaulted(&networkingv1.Ingress{ObjectMeta: objMeta("web"), Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "web.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}})
	}, []errCase[*networkingv1.Ingress]{
		{"rules or default backend", func(i *networkingv1.Ingress) { i.Spec.Rules = nil },
			field.ErrorTypeInvalid, "spec", "either `defaultBackend` or `rules` must be specified"},
		{"host is not an IP", func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "10.0.0.1" },
			field.ErrorTypeInvalid, "spec.rules[0].host", "must be a DNS name, not an IP address"},
		{"path type required", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].PathType = nil },
			field.ErrorTypeRequired, "spec.rules[0].http.paths[0].pathType", ""},
		{"prefix paths are absolute", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Path = "api" },
			field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].path", "must be an absolute path"},
		{"backend port required", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Number = 0 },
			field.ErrorTypeRequired, "spec.rules[0].http.paths[0].backend", "port name or number is required"},
	})
}

func TestValidatePolicyAndScheduling(t *testing.T) {
	runCreateCases(t, func() *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: objMeta("web"), Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: new(intstr.FromString("50%")), Selector: webSelector()}}
	}, []errCase[*policyv1.PodDisruptionBudget]{
		{"minAvailable xor maxUnavailable", func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = new(intstr.FromInt32(1)) },
			field.ErrorTypeInvalid, "spec", "minAvailable and maxUnavailable cannot be both set"},
		{"percent at most 100", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = new(intstr.FromString("120%")) },
			field.ErrorTypeInvalid, "spec.minAvailable", "must not be greater than 100%"},
		{"count not negative", func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = new(intstr.FromInt32(-1)) },
			field.ErrorTypeInvalid, "spec.minAvailable", ""},
	})
	validPC := func() *schedulingv1.PriorityClass {
		return defaulted(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000})
	}
	runCreateCases(t, validPC, []errCase[*schedulingv1.PriorityClass]{
		{"user value at most one billion", func(p *schedulingv1.PriorityClass) { p.Value = 1000000001 },
			field.ErrorTypeForbidden, "value", "maximum allowed value of a user defined priority is 1000000000"},
		{"system prefix reserved", func(p *schedulingv1.PriorityClass) { p.Name = "system-mine" },
			field.ErrorTypeForbidden, "metadata.name", "reserved for system use only"},
		{"preemption policy enum", func(p *schedulingv1.PriorityClass) { p.PreemptionPolicy = new(corev1.PreemptionPolicy("Sometimes")) },
			field.ErrorTypeNotSupported, "preemptionPolicy", ""},
	})
	runUpdateCases(t, func() *schedulingv1.PriorityClass { return stored(validPC()) }, []updateCase[*schedulingv1.PriorityClass]{
		{"description may change", func(p *schedulingv1.PriorityClass) { p.Description = "important" }, "", "", ""},
		{"value is fixed", func(p *schedulingv1.PriorityClass) { p.Value = 2000 }, field.ErrorTypeForbidden, "value", "may not be changed in an update."},
	})
	expectNoErrors(t, Validate(defaulted(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000})))
	runCreateCases(t, func() *policyv1.Eviction { return &policyv1.Eviction{ObjectMeta: objMeta("web")} }, []errCase[*policyv1.Eviction]{
		{"eviction names a pod", func(e *policyv1.Eviction) { e.Name = "" }, field.ErrorTypeRequired, "metadata.name", ""},
	})
}

func TestValidateLeaseAndCSR(t *testing.T) {
	runCreateCases(t, func() *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: objMeta("node-1"), Spec: coordinationv1.LeaseSpec{HolderIdentity: new("node-1"), LeaseDurationSeconds: new(int32(40))}}
	}, []errCase[*coordinationv1.Lease]{
		{"duration positive", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(0)) },
			field.ErrorTypeInvalid, "spec.leaseDurationSeconds", "must be greater than 0"},
		{"transitions not negative", func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = new(int32(-1)) },
			field.ErrorTypeInvalid, "spec.leaseTransitions", ""},
		{"preferred holder needs a strategy", func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = new("node-2") },
			field.ErrorTypeForbidden, "spec.preferredHolder", "may only be specified if `strategy` is defined"},
	})
	request := testCSRPEM(t)
	runCreateCases(t, func() *certificatesv1.CertificateSigningRequest {
		return defaulted(&certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "node-csr-abc"}, Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request, SignerName: "kubernetes.io/kube-apiserver-client-kubelet",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}})
	}, []errCase[*certificatesv1.CertificateSigningRequest]{
		{"request must be a PEM CSR", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") },
			field.ErrorTypeInvalid, "spec.request", "PEM block type must be CERTIFICATE REQUEST"},
		{"usages required", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }, field.ErrorTypeRequired, "spec.usages", ""},
		{"usage enum", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{"telepathy"}
		},
			field.ErrorTypeNotSupported, "spec.usages[0]", ""},
		{"signer name is domain/path", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubelet" },
			field.ErrorTypeInvalid, "spec.signerName", "must be a fully qualified domain and path"},
		{"expiration at least ten minutes", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = new(int32(60)) },
			field.ErrorTypeInvalid, "spec.expirationSeconds", "600 seconds"},
	})
}

func testCSRPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:node-1"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestValidateClassesAndAggregation(t *testing.T) {
	validIC := func() *networkingv1.IngressClass {
		return defaulted(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "traefik"},
			Spec: networkingv1.IngressClassSpec{Controller: "traefik.io/ingress-controller",
				Parameters: &networkingv1.IngressClassParametersReference{Kind: "IngressRoute", Name: "cfg"}}})
	}
	runCreateCases(t, validIC, []errCase[*networkingv1.IngressClass]{
		{"controller required", func(i *networkingv1.IngressClass) { i.Spec.Controller = "" }, field.ErrorTypeRequired, "spec.controller", ""},
		{"parameter scope enum", func(i *networkingv1.IngressClass) { i.Spec.Parameters.Scope = new("Galaxy") },
			field.ErrorTypeNotSupported, "spec.parameters.scope", ""},
	})
	runUpdateCases(t, func() *networkingv1.IngressClass { return stored(validIC()) }, []updateCase[*networkingv1.IngressClass]{
		{"controller is immutable", func(i *networkingv1.IngressClass) { i.Spec.Controller = "example.com/other" },
			field.ErrorTypeInvalid, "spec.controller", "field is immutable"},
	})
	runCreateCases(t, func() *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}, AggregationRule: &rbacv1.AggregationRule{
			ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.example.com/aggregate-to-monitoring": "true"}}}}}
	}, []errCase[*rbacv1.ClusterRole]{
		{"aggregation needs selectors", func(r *rbacv1.ClusterRole) { r.AggregationRule.ClusterRoleSelectors = nil },
			field.ErrorTypeRequired, "aggregationRule.clusterRoleSelectors", "at least one clusterRoleSelector required"},
		{"cluster roles may grant URLs but not mixed with resources", func(r *rbacv1.ClusterRole) {
			r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}, Resources: []string{"pods"}}}
		}, field.ErrorTypeInvalid, "rules[0].nonResourceURLs", "rules cannot apply to both regular resources and non-resource URLs"},
	})
}
