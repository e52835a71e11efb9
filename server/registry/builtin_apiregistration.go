package registry

import apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

// APIRegistration returns the row of apiregistration.k8s.io/v1 APIService:
// cluster-scoped, with a status subresource whose writes keep all the
// metadata users set (upstream's status strategy), in upstream's
// api-extensions category.
func APIRegistration(h Hooks) []*Resource {
	rows := []*Resource{
		with(row[apiregistrationv1.APIService, apiregistrationv1.APIServiceList]("apiregistration.k8s.io", "v1", "apiservices", "apiservice", "APIService", clusterScope),
			statusOnly, statusKeepsMeta, categories("api-extensions")),
	}
	for _, r := range rows {
		r.Default, r.Validate, r.ValidateUpdate = h.Default, h.Validate, h.ValidateUpdate
		r.ValidateSubresource = h.ValidateSubresource
	}
	return rows
}
