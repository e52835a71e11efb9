package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateServiceCIDR(t *testing.T) {
	valid := func() *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"203.0.113.0/24"}}}
	}
	runCreateCases(t, valid, []errCase[*networkingv1.ServiceCIDR]{
		{"cidrs required", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = nil }, field.ErrorTypeRequired, "spec.cidrs", "at least one CIDR required"},
		{"at most two", func(c *networkingv1.ServiceCIDR) {
			c.Spec.CIDRs = []string{"10.0.0.0/24", "2001:db8::/64", "10.1.0.0/24"}
		},
			field.ErrorTypeInvalid, "spec.cidrs", "may only hold up to 2 values"},
		{"not a CIDR", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = []string{"10.0.0.1"} }, field.ErrorTypeInvalid, "spec.cidrs[0]", ""},
		{"host bits set", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = []string{"10.0.0.1/24"} }, field.ErrorTypeInvalid, "spec.cidrs[0]", ""},
		{"two of one family", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = []string{"10.0.0.0/24", "10.1.0.0/24"} },
			field.ErrorTypeInvalid, "spec.cidrs", "may specify no more than one IP for each IP family"},
		{"name is a DNS subdomain", func(c *networkingv1.ServiceCIDR) { c.Name = "Extra_Range" }, field.ErrorTypeInvalid, "metadata.name", ""},
	})
	runUpdateCases(t, func() *networkingv1.ServiceCIDR { return stored(valid()) }, []updateCase[*networkingv1.ServiceCIDR]{
		{"a range is fixed", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = []string{"198.51.100.0/24"} }, field.ErrorTypeInvalid, "spec.cidrs[0]", "field is immutable"},
		{"the other family may be added", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = append(c.Spec.CIDRs, "2001:db8::/64") }, "", "", ""},
		{"not the same family twice", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = append(c.Spec.CIDRs, "198.51.100.0/24") },
			field.ErrorTypeInvalid, "spec.cidrs", "may specify no more than one IP for each IP family"},
		{"a range may not go", func(c *networkingv1.ServiceCIDR) { c.Spec.CIDRs = nil }, field.ErrorTypeInvalid, "spec.cidrs", "field is immutable"},
		{"status may change", func(c *networkingv1.ServiceCIDR) {
			c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}}
		}, "", "", ""},
	})
}

func TestValidateIPAddress(t *testing.T) {
	valid := func() *networkingv1.IPAddress {
		return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.10"},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}}}
	}
	runCreateCases(t, valid, []errCase[*networkingv1.IPAddress]{
		{"name is an IP", func(ip *networkingv1.IPAddress) { ip.Name = "web" }, field.ErrorTypeInvalid, "metadata.name", ""},
		{"name is canonical", func(ip *networkingv1.IPAddress) { ip.Name = "2001:db8:0::1" }, field.ErrorTypeInvalid, "metadata.name", "canonical form"},
		{"parentRef required", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef = nil }, field.ErrorTypeRequired, "spec.parentRef", ""},
		{"parent resource required", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Resource = "" }, field.ErrorTypeRequired, "spec.parentRef.resource", ""},
		{"parent name required", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Name = "" }, field.ErrorTypeRequired, "spec.parentRef.name", ""},
		{"parent group is a DNS subdomain", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Group = "My_Group" }, field.ErrorTypeInvalid, "spec.parentRef.group", ""},
		{"parent namespace is a path segment", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Namespace = "a/b" }, field.ErrorTypeInvalid, "spec.parentRef.namespace", ""},
	})
	// The addresses of the conformance test: any IP, special or not.
	for _, name := range []string{"255.255.255.255", "fe80::42:1dff:fe84:f9e2"} {
		ip := valid()
		ip.Name = name
		expectNoErrors(t, Validate(ip))
	}
	runUpdateCases(t, func() *networkingv1.IPAddress { return stored(valid()) }, []updateCase[*networkingv1.IPAddress]{
		{"labels may change", func(ip *networkingv1.IPAddress) { ip.Labels = map[string]string{"type": "broadcast"} }, "", "", ""},
		{"parent is fixed", func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Name = "other" }, field.ErrorTypeInvalid, "spec.parentRef", "field is immutable"},
	})
}

// The ExternalName half of the type changes: what the allocator leaves
// after clearing is valid, what it keeps (a changed address) is not.
func TestValidateServiceUpdate_ToExternalName(t *testing.T) {
	old := stored(defaulted(&corev1.Service{ObjectMeta: objMeta("web"), Spec: corev1.ServiceSpec{
		ClusterIP: "10.43.0.10", ClusterIPs: []string{"10.43.0.10"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		IPFamilyPolicy: new(corev1.IPFamilyPolicySingleStack), Ports: []corev1.ServicePort{{Port: 80}}}}))
	cleared := old.DeepCopy()
	cleared.Spec.Type, cleared.Spec.ExternalName = corev1.ServiceTypeExternalName, "foo.example.com"
	cleared.Spec.ClusterIP, cleared.Spec.ClusterIPs, cleared.Spec.IPFamilies, cleared.Spec.IPFamilyPolicy = "", nil, nil, nil
	expectNoErrors(t, ValidateUpdate(cleared, old))
	kept := cleared.DeepCopy()
	kept.Spec.ClusterIP, kept.Spec.ClusterIPs = "10.43.0.11", []string{"10.43.0.11"}
	expectError(t, ValidateUpdate(kept, old), field.ErrorTypeForbidden, "spec.clusterIPs", "may not be set for ExternalName services")
}
