package defaults

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func crdVersions(storage string, names ...string) []apiextensionsv1.CustomResourceDefinitionVersion {
	var vs []apiextensionsv1.CustomResourceDefinitionVersion
	for _, n := range names {
		vs = append(vs, apiextensionsv1.CustomResourceDefinitionVersion{Name: n, Served: true, Storage: n == storage})
	}
	return vs
}

func TestCRDDefaults_EmptyFields_UpstreamValues(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "foobars", Kind: "FooBar"},
		Versions: crdVersions("v2", "v1", "v2"),
	}}
	Apply(crd)
	expect(t, "singular", crd.Spec.Names.Singular, "foobar")
	expect(t, "listKind", crd.Spec.Names.ListKind, "FooBarList")
	expect(t, "conversion", crd.Spec.Conversion, &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter})
	expect(t, "storedVersions", crd.Status.StoredVersions, []string{"v2"})
	before := crd.DeepCopy()
	Apply(crd)
	expect(t, "second Apply", crd, before)
}

func TestCRDDefaults_SetFields_Kept(t *testing.T) {
	port := int32(8443)
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "foos", Singular: "thing", Kind: "Foo", ListKind: "Foos"},
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Name: "conv", Namespace: "ns", Port: &port}}}},
	}}
	Apply(crd)
	expect(t, "singular", crd.Spec.Names.Singular, "thing")
	expect(t, "listKind", crd.Spec.Names.ListKind, "Foos")
	expect(t, "strategy", crd.Spec.Conversion.Strategy, apiextensionsv1.WebhookConverter)
	expect(t, "port", *crd.Spec.Conversion.Webhook.ClientConfig.Service.Port, int32(8443))
}

func TestCRDDefaults_WebhookService_Port443(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Name: "conv", Namespace: "ns"}}}},
	}}
	Apply(crd)
	if p := crd.Spec.Conversion.Webhook.ClientConfig.Service.Port; p == nil || *p != 443 {
		t.Fatalf("service port = %v, want 443", p)
	}
}

func TestCRDDefaults_NewStorageVersion_JoinsStoredVersions(t *testing.T) {
	tests := []struct {
		name   string
		stored []string
		want   []string
	}{
		{"storage moved to v2", []string{"v1"}, []string{"v1", "v2"}},
		{"already stored", []string{"v2", "v1"}, []string{"v2", "v1"}},
		{"migrated away from v1", []string{"v2"}, []string{"v2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{
				Spec:   apiextensionsv1.CustomResourceDefinitionSpec{Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Foo"}, Versions: crdVersions("v2", "v1", "v2")},
				Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: tt.stored},
			}
			Apply(crd)
			expect(t, "storedVersions", crd.Status.StoredVersions, tt.want)
		})
	}
}
