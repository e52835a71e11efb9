package registry

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// APIExtensions returns the row of apiextensions.k8s.io/v1
// CustomResourceDefinitions, with upstream's short names and category. As
// upstream, metadata.generation counts spec changes and a /status write
// takes metadata from the request (upstream's status strategy resets
// nothing of it).
//
// It is not part of Builtin: the API may only accept CRDs once the server
// serves the custom objects they define. h should carry a
// validation.CRDValidator's methods, which also refuse CRDs that would
// shadow a built-in resource.
func APIExtensions(h Hooks) []*Resource {
	rows := []*Resource{
		with(row[apiextensionsv1.CustomResourceDefinition, apiextensionsv1.CustomResourceDefinitionList]("apiextensions.k8s.io", "v1",
			"customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", clusterScope, "crd", "crds"),
			statusOnly, generation, categories("api-extensions")),
	}
	for _, r := range rows {
		r.Default, r.Validate, r.ValidateUpdate = h.Default, h.Validate, h.ValidateUpdate
		r.ValidateSubresource = h.ValidateSubresource
	}
	return rows
}
