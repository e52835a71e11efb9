package registry

import networkingv1 "k8s.io/api/networking/v1"

// netExtraRows are the rows of networking.k8s.io/v1 ServiceCIDR and IPAddress.
// The Service IP allocator (server/admission) hands out addresses from the
// ServiceCIDRs and records each one as an IPAddress.
func netExtraRows() []*Resource {
	return []*Resource{
		with(row[networkingv1.ServiceCIDR, networkingv1.ServiceCIDRList]("networking.k8s.io", "v1", "servicecidrs", "servicecidr", "ServiceCIDR", clusterScope), statusOnly),
		row[networkingv1.IPAddress, networkingv1.IPAddressList]("networking.k8s.io", "v1", "ipaddresses", "ipaddress", "IPAddress", clusterScope, "ip"),
	}
}
