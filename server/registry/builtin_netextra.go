package registry

// netExtraRows are the rows of networking.k8s.io/v1 ServiceCIDR and IPAddress.
func netExtraRows() []*Resource {
	return nil
}
