package validation

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type crd = apiextensionsv1.CustomResourceDefinition

func objectSchema(props map[string]apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}}
}

// fooSchema is a structural schema with a spec and a status.
func fooSchema() *apiextensionsv1.CustomResourceValidation {
	return objectSchema(map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"replicas": {Type: "integer"},
			"host":     {Type: "string"},
			"enabled":  {Type: "boolean"},
			"labels":   {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
			"nested":   {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}}},
		}},
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
	})
}

// validCRD is a defaulted CRD as the API server validates it.
func validCRD() *crd {
	return &crd{
		ObjectMeta: metav1.ObjectMeta{Name: "foos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "foos", Singular: "foo", Kind: "Foo", ListKind: "FooList", ShortNames: []string{"fo"}, Categories: []string{"all"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true, Schema: fooSchema(),
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"}},
			}},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
	}
}

// twoVersionCRD has versions whose schemas and columns differ, so their
// errors are reported per version.
func twoVersionCRD() *crd {
	c := validCRD()
	v2 := *c.Spec.Versions[0].DeepCopy()
	v2.Name, v2.Storage = "v2", false
	v2.Schema.OpenAPIV3Schema.Properties["extra"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	v2.AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Host", Type: "string", JSONPath: ".spec.host"}}
	c.Spec.Versions = append(c.Spec.Versions, v2)
	return c
}

func webhookConversion(cc *apiextensionsv1.WebhookClientConfig, review ...string) *apiextensionsv1.CustomResourceConversion {
	return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: cc, ConversionReviewVersions: review}}
}

func serviceConfig() *apiextensionsv1.WebhookClientConfig {
	port := int32(443)
	return &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "default", Name: "conv", Port: &port}}
}

func strp(s string) *string { return &s }

func TestValidateCRD_ValidDefinitions_NoErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*crd)
	}{
		{"single version", func(*crd) {}},
		{"two versions with their own schemas", func(c *crd) { *c = *twoVersionCRD() }},
		{"webhook conversion to a service", func(c *crd) {
			*c = *twoVersionCRD()
			c.Spec.Conversion = webhookConversion(serviceConfig(), "v1", "v1beta1")
			c.Spec.Conversion.Webhook.ClientConfig.Service.Path = strp("/crdconvert")
		}},
		{"webhook conversion to a URL", func(c *crd) {
			c.Spec.Conversion = webhookConversion(&apiextensionsv1.WebhookClientConfig{URL: strp("https://conv.example.com/convert")}, "v1")
		}},
		{"cluster scope", func(c *crd) { c.Spec.Scope = apiextensionsv1.ClusterScoped }},
		{"mixed-case kind", func(c *crd) { c.Spec.Names.Kind, c.Spec.Names.ListKind = "FooBar", "FooBarList" }},
		{"protected group with a bypass reason", func(c *crd) {
			c.Name, c.Spec.Group = "foos.x.k8s.io", "x.k8s.io"
			c.Annotations = map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "unapproved, testing only"}
		}},
		{"protected group with an approval URL", func(c *crd) {
			c.Name, c.Spec.Group = "foos.x.k8s.io", "x.k8s.io"
			c.Annotations = map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "https://github.com/kubernetes/kubernetes/pull/78458"}
		}},
		{"selectable fields of string, integer and boolean type", func(c *crd) {
			c.Spec.Versions[0].SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".spec.host"}, {JSONPath: ".spec.replicas"}, {JSONPath: ".spec.enabled"}, {JSONPath: ".spec.labels.app"}}
		}},
		{"validation rule with a valid field path", func(c *crd) {
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.XValidations = apiextensionsv1.ValidationRules{{Rule: "self.spec.replicas >= 0", FieldPath: ".spec.replicas", Reason: ptrTo(apiextensionsv1.FieldValueForbidden)}}
		}},
		{"deprecated version with a warning", func(c *crd) {
			c.Spec.Versions[0].Deprecated, c.Spec.Versions[0].DeprecationWarning = true, strp("use v2")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCRD()
			tt.mutate(c)
			expectNoErrors(t, Validate(c))
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestValidateCRD_MetadataGroupAndNames_UpstreamErrors(t *testing.T) {
	runCreateCases(t, validCRD, []errCase[*crd]{
		{"name is not plural.group", func(c *crd) { c.Name = "foo.example.com" }, field.ErrorTypeInvalid, "metadata.name", `must be spec.names.plural+"."+spec.group`},
		{"namespaced metadata", func(c *crd) { c.Namespace = "default" }, field.ErrorTypeForbidden, "metadata.namespace", "not allowed on this type"},
		{"group missing", func(c *crd) { c.Spec.Group = ""; c.Name = "foos." }, field.ErrorTypeRequired, "spec.group", ""},
		{"group without a dot", func(c *crd) { c.Spec.Group, c.Name = "example", "foos.example" }, field.ErrorTypeInvalid, "spec.group", "should be a domain with at least one dot"},
		{"group not a DNS subdomain", func(c *crd) { c.Spec.Group, c.Name = "Example.com", "foos.Example.com" }, field.ErrorTypeInvalid, "spec.group", "a lowercase RFC 1123 subdomain"},
		{"scope missing", func(c *crd) { c.Spec.Scope = "" }, field.ErrorTypeRequired, "spec.scope", ""},
		{"scope unknown", func(c *crd) { c.Spec.Scope = "Global" }, field.ErrorTypeNotSupported, "spec.scope", `"Cluster", "Namespaced"`},
		{"plural missing", func(c *crd) { c.Spec.Names.Plural = ""; c.Name = ".example.com" }, field.ErrorTypeRequired, "spec.names.plural", ""},
		{"singular missing", func(c *crd) { c.Spec.Names.Singular = "" }, field.ErrorTypeRequired, "spec.names.singular", ""},
		{"kind missing", func(c *crd) { c.Spec.Names.Kind = "" }, field.ErrorTypeRequired, "spec.names.kind", ""},
		{"listKind missing", func(c *crd) { c.Spec.Names.ListKind = "" }, field.ErrorTypeRequired, "spec.names.listKind", ""},
		{"plural not a DNS label", func(c *crd) { c.Spec.Names.Plural, c.Name = "Foos", "Foos.example.com" }, field.ErrorTypeInvalid, "spec.names.plural", "a DNS-1035 label must consist of"},
		{"singular not a DNS label", func(c *crd) { c.Spec.Names.Singular = "foo.bar" }, field.ErrorTypeInvalid, "spec.names.singular", "a DNS-1035 label must consist of"},
		{"kind with an underscore", func(c *crd) { c.Spec.Names.Kind = "Foo_Bar" }, field.ErrorTypeInvalid, "spec.names.kind", "may have mixed case, but should otherwise match"},
		{"listKind with a dot", func(c *crd) { c.Spec.Names.ListKind = "Foo.List" }, field.ErrorTypeInvalid, "spec.names.listKind", "may have mixed case, but should otherwise match"},
		{"kind equals listKind", func(c *crd) { c.Spec.Names.ListKind = "Foo" }, field.ErrorTypeInvalid, "spec.names.listKind", "kind and listKind may not be the same"},
		{"short name not a DNS label", func(c *crd) { c.Spec.Names.ShortNames = []string{"ok", "F_O"} }, field.ErrorTypeInvalid, "spec.names.shortNames[1]", "a DNS-1035 label must consist of"},
		{"category not a DNS label", func(c *crd) { c.Spec.Names.Categories = []string{"My Stuff"} }, field.ErrorTypeInvalid, "spec.names.categories[0]", "a DNS-1035 label must consist of"},
		{"protected group without approval", func(c *crd) { c.Name, c.Spec.Group = "foos.x.k8s.io", "x.k8s.io" },
			field.ErrorTypeRequired, "metadata.annotations[api-approved.kubernetes.io]", `protected groups must have approval annotation "api-approved.kubernetes.io"`},
		{"kubernetes.io group with a bad approval", func(c *crd) {
			c.Name, c.Spec.Group = "foos.kubernetes.io", "kubernetes.io"
			c.Annotations = map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "yes"}
		}, field.ErrorTypeInvalid, "metadata.annotations[api-approved.kubernetes.io]", `with either a URL or a reason starting with "unapproved"`},
		{"preserveUnknownFields true", func(c *crd) { c.Spec.PreserveUnknownFields = true }, field.ErrorTypeInvalid, "spec.preserveUnknownFields",
			"cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"},
	})
}

func TestValidateCRD_Versions_UpstreamErrors(t *testing.T) {
	runCreateCases(t, validCRD, []errCase[*crd]{
		{"no versions", func(c *crd) { c.Spec.Versions = nil }, field.ErrorTypeInvalid, "spec.versions", "must have exactly one version marked as storage version"},
		{"no storage version", func(c *crd) { c.Spec.Versions[0].Storage = false }, field.ErrorTypeInvalid, "spec.versions", "must have exactly one version marked as storage version"},
		{"two storage versions", func(c *crd) { *c = *twoVersionCRD(); c.Spec.Versions[1].Storage = true }, field.ErrorTypeInvalid, "spec.versions", "must have exactly one version marked as storage version"},
		{"duplicate version names", func(c *crd) { *c = *twoVersionCRD(); c.Spec.Versions[1].Name = "v1" }, field.ErrorTypeInvalid, "spec.versions", "must contain unique version names"},
		{"version name not a DNS-1035 label", func(c *crd) { c.Spec.Versions[0].Name = "V1"; c.Status.StoredVersions = []string{"V1"} }, field.ErrorTypeInvalid, "spec.versions[0].name", "a DNS-1035 label must consist of"},
		{"version without a schema", func(c *crd) { *c = *twoVersionCRD(); c.Spec.Versions[1].Schema = nil }, field.ErrorTypeRequired, "spec.versions[1].schema.openAPIV3Schema", ""},
		{"schema without openAPIV3Schema", func(c *crd) { c.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{} }, field.ErrorTypeRequired, "spec.versions[0].schema.openAPIV3Schema", ""},
		{"deprecation warning on a current version", func(c *crd) { c.Spec.Versions[0].DeprecationWarning = strp("old") },
			field.ErrorTypeInvalid, "spec.versions[0].deprecationWarning", "can only be set for deprecated versions"},
		{"empty deprecation warning", func(c *crd) { c.Spec.Versions[0].Deprecated, c.Spec.Versions[0].DeprecationWarning = true, strp("") },
			field.ErrorTypeInvalid, "spec.versions[0].deprecationWarning", "must not be an empty string"},
		{"stored versions empty", func(c *crd) { c.Status.StoredVersions = nil }, field.ErrorTypeInvalid, "status.storedVersions", "must have at least one stored version"},
		{"stored versions without the storage version", func(c *crd) { *c = *twoVersionCRD(); c.Status.StoredVersions = []string{"v2"} },
			field.ErrorTypeInvalid, "status.storedVersions", "must have the storage version v1"},
		{"stored version missing from spec", func(c *crd) { c.Status.StoredVersions = []string{"v1", "v0"} },
			field.ErrorTypeInvalid, "status.storedVersions[1]", "missing from spec.versions; v0 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v0"},
		{"accepted names invalid", func(c *crd) { c.Status.AcceptedNames.Plural = "Foos" }, field.ErrorTypeInvalid, "status.acceptedNames.plural", "a DNS-1035 label must consist of"},
	})
}

func TestValidateCRD_SubresourcesAndColumns_UpstreamErrors(t *testing.T) {
	scale := func(c *crd) *apiextensionsv1.CustomResourceSubresourceScale {
		return c.Spec.Versions[0].Subresources.Scale
	}
	runCreateCases(t, validCRD, []errCase[*crd]{
		// one version: upstream reports the shared parts at spec.<part>
		{"spec replicas path outside .spec", func(c *crd) { scale(c).SpecReplicasPath = ".status.replicas" },
			field.ErrorTypeInvalid, "spec.subresources.scale.specReplicasPath", "should be a json path under .spec"},
		{"spec replicas path missing", func(c *crd) { scale(c).SpecReplicasPath = "" }, field.ErrorTypeRequired, "spec.subresources.scale.specReplicasPath", ""},
		{"status replicas path outside .status", func(c *crd) { scale(c).StatusReplicasPath = ".spec.replicas" },
			field.ErrorTypeInvalid, "spec.subresources.scale.statusReplicasPath", "should be a json path under .status"},
		{"status replicas path missing", func(c *crd) { scale(c).StatusReplicasPath = "" }, field.ErrorTypeRequired, "spec.subresources.scale.statusReplicasPath", ""},
		{"label selector path without a leading dot", func(c *crd) { scale(c).LabelSelectorPath = strp("status.selector") },
			field.ErrorTypeInvalid, "spec.subresources.scale.labelSelectorPath", "must be a simple json path starting with ."},
		{"label selector path outside spec and status", func(c *crd) { scale(c).LabelSelectorPath = strp(".metadata.labels") },
			field.ErrorTypeInvalid, "spec.subresources.scale.labelSelectorPath", "should be a json path under either .spec or .status"},
		{"column type unknown", func(c *crd) { c.Spec.Versions[0].AdditionalPrinterColumns[0].Type = "float" },
			field.ErrorTypeInvalid, "spec.additionalPrinterColumns[0].type", "must be one of boolean,date,integer,number,string"},
		{"column type missing", func(c *crd) { c.Spec.Versions[0].AdditionalPrinterColumns[0].Type = "" },
			field.ErrorTypeRequired, "spec.additionalPrinterColumns[0].type", "must be one of boolean,date,integer,number,string"},
		{"column format unknown", func(c *crd) { c.Spec.Versions[0].AdditionalPrinterColumns[0].Format = "uuid" },
			field.ErrorTypeInvalid, "spec.additionalPrinterColumns[0].format", "must be one of byte,date,date-time,double,float,int32,int64,password"},
		{"column name missing", func(c *crd) { c.Spec.Versions[0].AdditionalPrinterColumns[0].Name = "" }, field.ErrorTypeRequired, "spec.additionalPrinterColumns[0].name", ""},
		{"column path missing", func(c *crd) { c.Spec.Versions[0].AdditionalPrinterColumns[0].JSONPath = "" }, field.ErrorTypeRequired, "spec.additionalPrinterColumns[0].JSONPath", ""},
		{"column path without a leading dot", func(c *crd) { c.Spec.Versions[0].AdditionalPrinterColumns[0].JSONPath = "spec.replicas" },
			field.ErrorTypeInvalid, "spec.additionalPrinterColumns[0].JSONPath", "must be a simple json path starting with ."},
		{"column path that does not parse", func(c *crd) { c.Spec.Versions[0].AdditionalPrinterColumns[0].JSONPath = ".spec.items[" },
			field.ErrorTypeInvalid, "spec.additionalPrinterColumns[0].JSONPath", "must be a valid JSONPath expression"},
		{"per-version column type unknown", func(c *crd) { *c = *twoVersionCRD(); c.Spec.Versions[1].AdditionalPrinterColumns[0].Type = "float" },
			field.ErrorTypeInvalid, "spec.versions[1].additionalPrinterColumns[0].type", "must be one of"},
		{"per-version scale path", func(c *crd) {
			*c = *twoVersionCRD()
			c.Spec.Versions[1].Subresources = &apiextensionsv1.CustomResourceSubresources{Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".replicas", StatusReplicasPath: ".status.replicas"}}
		}, field.ErrorTypeInvalid, "spec.versions[1].subresources.scale.specReplicasPath", "should be a json path under .spec"},
	})
}

func TestValidateCRD_SchemaRulesAndSelectableFields_UpstreamErrors(t *testing.T) {
	root := func(c *crd) *apiextensionsv1.JSONSchemaProps { return c.Spec.Versions[0].Schema.OpenAPIV3Schema }
	rules := func(rs ...apiextensionsv1.ValidationRule) func(*crd) {
		return func(c *crd) { root(c).XValidations = rs }
	}
	selectable := func(paths ...string) func(*crd) {
		return func(c *crd) {
			for _, p := range paths {
				c.Spec.Versions[0].SelectableFields = append(c.Spec.Versions[0].SelectableFields, apiextensionsv1.SelectableField{JSONPath: p})
			}
		}
	}
	const rootPath = "spec.validation.openAPIV3Schema"
	runCreateCases(t, validCRD, []errCase[*crd]{
		{"rule empty", rules(apiextensionsv1.ValidationRule{Rule: "  "}), field.ErrorTypeRequired, rootPath + ".x-kubernetes-validations[0].rule", "rule is not specified"},
		{"message blank", rules(apiextensionsv1.ValidationRule{Rule: "true", Message: " "}), field.ErrorTypeInvalid, rootPath + ".x-kubernetes-validations[0].message", "must be non-empty if specified"},
		{"message with a line break", rules(apiextensionsv1.ValidationRule{Rule: "true", Message: "a\nb"}), field.ErrorTypeInvalid, rootPath + ".x-kubernetes-validations[0].message", "must not contain line breaks"},
		{"multi-line rule without a message", rules(apiextensionsv1.ValidationRule{Rule: "true &&\ntrue"}), field.ErrorTypeRequired, rootPath + ".x-kubernetes-validations[0].message", "message must be specified if rule contains line breaks"},
		{"blank message expression", rules(apiextensionsv1.ValidationRule{Rule: "true", MessageExpression: " "}), field.ErrorTypeRequired, rootPath + ".x-kubernetes-validations[0].messageExpression", "messageExpression must be non-empty if specified"},
		{"unknown reason", rules(apiextensionsv1.ValidationRule{Rule: "true", Reason: ptrTo(apiextensionsv1.FieldValueErrorReason("FieldValueBad"))}),
			field.ErrorTypeNotSupported, rootPath + ".x-kubernetes-validations[0].reason", "FieldValueDuplicate"},
		{"field path to an undeclared field", rules(apiextensionsv1.ValidationRule{Rule: "true", FieldPath: ".spec.missing"}), field.ErrorTypeInvalid, rootPath + ".x-kubernetes-validations[0].fieldPath", "must be a valid path"},
		{"nested rule empty", func(c *crd) {
			spec := root(c).Properties["spec"]
			spec.XValidations = apiextensionsv1.ValidationRules{{Rule: ""}}
			root(c).Properties["spec"] = spec
		}, field.ErrorTypeRequired, rootPath + ".properties[spec].x-kubernetes-validations[0].rule", "rule is not specified"},
		{"per-version schema rule empty", func(c *crd) {
			*c = *twoVersionCRD()
			c.Spec.Versions[1].Schema.OpenAPIV3Schema.XValidations = apiextensionsv1.ValidationRules{{Rule: ""}}
		}, field.ErrorTypeRequired, "spec.versions[1].schema.openAPIV3Schema.x-kubernetes-validations[0].rule", "rule is not specified"},
		{"rule empty in a schema both versions share", func(c *crd) {
			*c = *twoVersionCRD()
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.XValidations = apiextensionsv1.ValidationRules{{Rule: ""}}
			c.Spec.Versions[1].Schema = c.Spec.Versions[0].Schema.DeepCopy()
		}, field.ErrorTypeRequired, rootPath + ".x-kubernetes-validations[0].rule", "rule is not specified"},
		{"selectable field of object type", selectable(".spec.nested"), field.ErrorTypeInvalid, "spec.selectableFields[0].jsonPath", "must point to a field of type string, boolean or integer"},
		{"selectable field in metadata", func(c *crd) {
			root(c).Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}}}
			selectable(".metadata.name")(c)
		}, field.ErrorTypeInvalid, "spec.selectableFields[0].jsonPath", "must not point to fields in metadata"},
		{"selectable field undeclared", selectable(".spec.missing"), field.ErrorTypeInvalid, "spec.selectableFields[0].jsonPath", "is an invalid path: does not refer to a valid field"},
		{"selectable field in array notation", selectable(".spec['host']"), field.ErrorTypeInvalid, "spec.selectableFields[0].jsonPath", "is an invalid path: array notation is not allowed"},
		{"selectable field twice", selectable(".spec.host", ".spec.host"), field.ErrorTypeDuplicate, "spec.selectableFields[1].jsonPath", ""},
		{"selectable field path empty", selectable(""), field.ErrorTypeRequired, "spec.selectableFields[0].jsonPath", ""},
		{"more than eight selectable fields", func(c *crd) {
			for i := 0; i < 9; i++ {
				name := fmt.Sprintf("f%d", i)
				root(c).Properties["spec"].Properties[name] = apiextensionsv1.JSONSchemaProps{Type: "string"}
				selectable(".spec." + name)(c)
			}
		}, field.ErrorTypeTooMany, "spec.selectableFields", ""},
		{"per-version selectable fields over a shared schema", func(c *crd) {
			*c = *twoVersionCRD()
			c.Spec.Versions[1].Schema = c.Spec.Versions[0].Schema.DeepCopy()
			c.Spec.Versions[1].SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".spec.host"}}
		}, field.ErrorTypeInvalid, "spec.versions[1].selectableFields", "may only be set when `version.schema.openAPIV3Schema` is not included"},
	})
}

func TestValidateCRD_Conversion_UpstreamErrors(t *testing.T) {
	cc := func(c *crd) *apiextensionsv1.WebhookClientConfig { return c.Spec.Conversion.Webhook.ClientConfig }
	withWebhook := func(mutate func(*crd)) func(*crd) {
		return func(c *crd) {
			c.Spec.Conversion = webhookConversion(serviceConfig(), "v1")
			mutate(c)
		}
	}
	runCreateCases(t, validCRD, []errCase[*crd]{
		{"strategy missing", func(c *crd) { c.Spec.Conversion.Strategy = "" }, field.ErrorTypeRequired, "spec.conversion.strategy", ""},
		{"strategy unknown", func(c *crd) { c.Spec.Conversion.Strategy = "Magic" }, field.ErrorTypeNotSupported, "spec.conversion.strategy", `"None", "Webhook"`},
		{"webhook without a client config", withWebhook(func(c *crd) { c.Spec.Conversion.Webhook.ClientConfig = nil }),
			field.ErrorTypeRequired, "spec.conversion.webhookClientConfig", "required when strategy is set to Webhook"},
		{"webhook strategy without webhook", withWebhook(func(c *crd) { c.Spec.Conversion.Webhook = nil }),
			field.ErrorTypeRequired, "spec.conversion.conversionReviewVersions", ""},
		{"both url and service", withWebhook(func(c *crd) { cc(c).URL = strp("https://conv.example.com") }),
			field.ErrorTypeRequired, "spec.conversion.webhookClientConfig", "exactly one of url or service is required"},
		{"neither url nor service", withWebhook(func(c *crd) { cc(c).Service = nil }),
			field.ErrorTypeRequired, "spec.conversion.webhookClientConfig", "exactly one of url or service is required"},
		{"http url", withWebhook(func(c *crd) { cc(c).Service, cc(c).URL = nil, strp("http://conv.example.com") }),
			field.ErrorTypeInvalid, "spec.conversion.webhookClientConfig.url", "'https' is the only allowed URL scheme"},
		{"url with a query", withWebhook(func(c *crd) { cc(c).Service, cc(c).URL = nil, strp("https://conv.example.com/?a=b") }),
			field.ErrorTypeInvalid, "spec.conversion.webhookClientConfig.url", "query parameters are not permitted in the URL"},
		{"service without a name", withWebhook(func(c *crd) { cc(c).Service.Name = "" }), field.ErrorTypeRequired, "spec.conversion.webhookClientConfig.service.name", ""},
		{"service without a namespace", withWebhook(func(c *crd) { cc(c).Service.Namespace = "" }), field.ErrorTypeRequired, "spec.conversion.webhookClientConfig.service.namespace", ""},
		{"service port out of range", withWebhook(func(c *crd) { cc(c).Service.Port = ptrTo(int32(70000)) }),
			field.ErrorTypeInvalid, "spec.conversion.webhookClientConfig.service.port", "port is not valid"},
		{"service path with an empty segment", withWebhook(func(c *crd) { cc(c).Service.Path = strp("/a//b") }),
			field.ErrorTypeInvalid, "spec.conversion.webhookClientConfig.service.path", "segment[1] may not be empty"},
		{"service path without a leading slash", withWebhook(func(c *crd) { cc(c).Service.Path = strp("convert") }),
			field.ErrorTypeInvalid, "spec.conversion.webhookClientConfig.service.path", "must start with a '/'"},
		{"no review versions", withWebhook(func(c *crd) { c.Spec.Conversion.Webhook.ConversionReviewVersions = nil }),
			field.ErrorTypeRequired, "spec.conversion.conversionReviewVersions", ""},
		{"no review version this server speaks", withWebhook(func(c *crd) { c.Spec.Conversion.Webhook.ConversionReviewVersions = []string{"v2"} }),
			field.ErrorTypeInvalid, "spec.conversion.conversionReviewVersions", "must include at least one of v1, v1beta1"},
		{"duplicate review version", withWebhook(func(c *crd) { c.Spec.Conversion.Webhook.ConversionReviewVersions = []string{"v1", "v1"} }),
			field.ErrorTypeInvalid, "spec.conversion.conversionReviewVersions[1]", "duplicate version"},
		{"None with a client config", func(c *crd) {
			c.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{ClientConfig: serviceConfig()}
		},
			field.ErrorTypeForbidden, "spec.conversion.webhookClientConfig", "should not be set when strategy is not set to Webhook"},
		{"None with review versions", func(c *crd) {
			c.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}}
		},
			field.ErrorTypeForbidden, "spec.conversion.conversionReviewVersions", "should not be set when strategy is not set to Webhook"},
	})
}

func establishedCRD() *crd {
	c := twoVersionCRD()
	c.ResourceVersion = "5"
	c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	return c
}

func TestValidateCRDUpdate_Rules_UpstreamErrors(t *testing.T) {
	runUpdateCases(t, establishedCRD, []updateCase[*crd]{
		{name: "adding a served version", mutate: func(c *crd) {
			v3 := *c.Spec.Versions[1].DeepCopy()
			v3.Name = "v3"
			c.Spec.Versions = append(c.Spec.Versions, v3)
		}},
		{name: "moving storage to a new version stored alongside the old", mutate: func(c *crd) {
			c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, true
			c.Status.StoredVersions = []string{"v1", "v2"}
		}},
		{"group changed", func(c *crd) { c.Spec.Group = "example.org" }, field.ErrorTypeInvalid, "spec.group", "field is immutable"},
		{"plural changed", func(c *crd) { c.Spec.Names.Plural = "bars" }, field.ErrorTypeInvalid, "spec.names.plural", "field is immutable"},
		{"scope changed once established", func(c *crd) { c.Spec.Scope = apiextensionsv1.ClusterScoped }, field.ErrorTypeInvalid, "spec.scope", "field is immutable"},
		{"kind changed once established", func(c *crd) { c.Spec.Names.Kind, c.Spec.Names.ListKind = "Bar", "BarList" }, field.ErrorTypeInvalid, "spec.names.kind", "field is immutable"},
		{"stored version removed from spec", func(c *crd) {
			c.Spec.Versions = c.Spec.Versions[1:]
			c.Spec.Versions[0].Storage = true
			c.Status.StoredVersions = []string{"v1", "v2"}
		}, field.ErrorTypeInvalid, "status.storedVersions[0]", "missing from spec.versions; v1 was previously a storage version"},
		{"name changed", func(c *crd) { c.Name = "bars.example.com" }, field.ErrorTypeInvalid, "metadata.name", "field is immutable"},
		{"invalid CA bundle once established", func(c *crd) {
			c.Spec.Conversion = webhookConversion(serviceConfig(), "v1")
			c.Spec.Conversion.Webhook.ClientConfig.CABundle = []byte("not a certificate")
		}, field.ErrorTypeInvalid, "spec.conversion.webhookClientConfig.caBundle", "unable to load root certificates"},
	})
}

func TestValidateCRDUpdate_NotEstablished_AllowsScopeKindAndBadBundle(t *testing.T) {
	old := twoVersionCRD()
	old.ResourceVersion = "5"
	obj := old.DeepCopy()
	obj.Spec.Scope = apiextensionsv1.ClusterScoped
	obj.Spec.Names.Kind, obj.Spec.Names.ListKind = "Bar", "BarList"
	obj.Spec.Conversion = webhookConversion(serviceConfig(), "v1")
	obj.Spec.Conversion.Webhook.ClientConfig.CABundle = []byte("not a certificate")
	expectNoErrors(t, ValidateUpdate(obj, old))
}

func TestValidateCRDUpdate_ApprovalUnchanged_Accepted(t *testing.T) {
	// stored before the rule: a spec-only update must not be refused
	old := validCRD()
	old.Name, old.Spec.Group, old.ResourceVersion = "foos.x.k8s.io", "x.k8s.io", "5"
	obj := old.DeepCopy()
	obj.Spec.Names.ShortNames = []string{"fx"}
	expectNoErrors(t, ValidateUpdate(obj, old))

	obj.Annotations = map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "yes"}
	expectError(t, ValidateUpdate(obj, old), field.ErrorTypeInvalid, "metadata.annotations[api-approved.kubernetes.io]", "with either a URL")
}

func TestCRDValidator_BuiltinResource_Refused(t *testing.T) {
	v := CRDValidator{Builtin: func(gr schema.GroupResource) bool {
		return gr == schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}
	}}
	shadow := validCRD()
	shadow.Name, shadow.Spec.Group = "ingresses.networking.k8s.io", "networking.k8s.io"
	shadow.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "ingresses", Singular: "ingress", Kind: "Ingress", ListKind: "IngressList"}
	shadow.Annotations = map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "unapproved"}
	expectError(t, v.Validate(shadow), field.ErrorTypeForbidden, "spec.names.plural", "ingresses.networking.k8s.io is served by the API server itself")

	beside := shadow.DeepCopy()
	beside.Name, beside.Spec.Names.Plural = "gateways.networking.k8s.io", "gateways"
	beside.Spec.Names.Singular, beside.Spec.Names.Kind, beside.Spec.Names.ListKind = "gateway", "Gateway", "GatewayList"
	expectNoErrors(t, v.Validate(beside))
	// without the server's table nothing collides
	expectNoErrors(t, CRDValidator{}.Validate(shadow))

	byKind := CRDValidator{BuiltinKind: func(gk schema.GroupKind) bool {
		return gk == schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}
	}}
	sameKind := beside.DeepCopy()
	sameKind.Spec.Names.Kind, sameKind.Spec.Names.ListKind = "Ingress", "IngressList"
	expectError(t, byKind.Validate(sameKind), field.ErrorTypeForbidden, "spec.names.kind", "kind Ingress.networking.k8s.io is served by the API server itself")
	expectNoErrors(t, byKind.Validate(beside))
}

func TestCRDValidator_OtherKinds_Delegated(t *testing.T) {
	v := CRDValidator{Builtin: func(schema.GroupResource) bool { return true }}
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name", Namespace: "default"}}
	expectError(t, v.Validate(bad), field.ErrorTypeInvalid, "metadata.name", "")
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default", ResourceVersion: "1"}, Data: map[string]string{"a": "b"}}
	renamed := old.DeepCopy()
	renamed.Name = "other"
	expectError(t, v.ValidateUpdate(renamed, old), field.ErrorTypeInvalid, "metadata.name", "field is immutable")
	if _, ok := v.ValidateSubresource("status", renamed, old); ok {
		t.Fatalf("a ConfigMap /status write has no rules of its own")
	}
}

func TestCRDValidator_StatusSubresource_UpstreamRules(t *testing.T) {
	v := CRDValidator{}
	old := establishedCRD()
	tests := []struct {
		name   string
		mutate func(*crd)
		typ    field.ErrorType
		path   string
	}{
		{name: "accepted names set", mutate: func(c *crd) { c.Status.AcceptedNames = c.Spec.Names }},
		// storage migration drops a version here before the spec does
		{name: "stored versions emptied", mutate: func(c *crd) { c.Status.StoredVersions = nil }},
		{"accepted plural invalid", func(c *crd) { c.Status.AcceptedNames.Plural = "Foos" }, field.ErrorTypeInvalid, "status.acceptedNames.plural"},
		{"accepted kind equals list kind", func(c *crd) { c.Status.AcceptedNames.Kind, c.Status.AcceptedNames.ListKind = "Foo", "Foo" }, field.ErrorTypeInvalid, "status.acceptedNames.listKind"},
		{"name changed", func(c *crd) { c.Name = "x.example.com" }, field.ErrorTypeInvalid, "metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := old.DeepCopy()
			tt.mutate(obj)
			errs, ok := v.ValidateSubresource("status", obj, old)
			if !ok {
				t.Fatalf("customresourcedefinitions/status must have rules of its own")
			}
			if tt.path == "" {
				expectNoErrors(t, errs)
				return
			}
			expectError(t, errs, tt.typ, tt.path, "")
		})
	}
	if _, ok := v.ValidateSubresource("scale", old.DeepCopy(), old); ok {
		t.Fatalf("a CRD has no scale subresource rules")
	}
}
