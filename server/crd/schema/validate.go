package schema

import (
	"encoding/json"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// Value validation is kube-openapi's, on a spec.Schema converted from the
// CRD schema as upstream's apiserver/validation package converts it, so the
// messages are upstream's ("spec.replicas in body must be of type integer").

// supportedStringFormats are the string formats CRD schemas may use at
// the current compatibility version (upstream's supportedVersionedFormats,
// normalised without dashes as go-openapi does); others are ignored.
var supportedStringFormats = sets.New(
	"bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac",
	"uuid", "uuid3", "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard",
	"ssn", "hexcolor", "rgbcolor", "byte", "password", "date", "duration", "datetime",
	"k8sshortname", "k8slongname",
)

// stripUnsupportedFormat drops a format the API server does not validate,
// so it neither fails nor passes values by accident.
func stripUnsupportedFormat(out *spec.Schema) {
	if out.Format == "" {
		return
	}
	t := ""
	if len(out.Type) == 1 {
		t = out.Type[0]
	}
	switch t {
	case "", "string":
		if !supportedStringFormats.Has(strings.ReplaceAll(out.Format, "-", "")) {
			out.Format = ""
		}
	case "integer":
		if out.Format != "int32" && out.Format != "int64" {
			out.Format = ""
		}
	case "number":
		if out.Format != "float" && out.Format != "double" {
			out.Format = ""
		}
	default:
		out.Format = ""
	}
}

// converter turns CRD schema nodes into kube-openapi ones. forDefaults
// mirrors upstream validating defaults against the structural schema
// (Structural.ToKubeOpenAPI): no int-or-string type, no format stripping.
type converter struct{ forDefaults bool }

func (c converter) convert(in *apiextensionsv1.JSONSchemaProps) *spec.Schema {
	if in == nil {
		return nil
	}
	out := &spec.Schema{}
	out.Description = in.Description
	if in.Type != "" {
		out.Type = spec.StringOrArray{in.Type}
	}
	if in.XIntOrString && !c.forDefaults {
		out.Type = spec.StringOrArray{"integer", "string"}
	}
	out.Nullable = in.Nullable
	out.Format = in.Format
	out.Title = in.Title
	out.Maximum, out.ExclusiveMaximum = in.Maximum, in.ExclusiveMaximum
	out.Minimum, out.ExclusiveMinimum = in.Minimum, in.ExclusiveMinimum
	out.MaxLength, out.MinLength = in.MaxLength, in.MinLength
	out.Pattern = in.Pattern
	out.MaxItems, out.MinItems = in.MaxItems, in.MinItems
	out.UniqueItems = in.UniqueItems
	out.MultipleOf = in.MultipleOf
	out.MaxProperties, out.MinProperties = in.MaxProperties, in.MinProperties
	out.Required = in.Required
	if v, ok := decodeJSON(in.Default); ok {
		out.Default = v
	}
	if in.Enum != nil {
		out.Enum = make([]any, len(in.Enum))
		for i := range in.Enum {
			out.Enum[i], _ = decodeJSON(&in.Enum[i])
		}
	}
	for _, list := range []struct {
		in  []apiextensionsv1.JSONSchemaProps
		out *[]spec.Schema
	}{{in.AllOf, &out.AllOf}, {in.OneOf, &out.OneOf}, {in.AnyOf, &out.AnyOf}} {
		for i := range list.in {
			*list.out = append(*list.out, *c.convert(&list.in[i]))
		}
	}
	out.Not = c.convert(in.Not)
	if in.Properties != nil {
		out.Properties = make(map[string]spec.Schema, len(in.Properties))
		for k, p := range in.Properties {
			out.Properties[k] = *c.convert(&p)
		}
	}
	if in.AdditionalProperties != nil {
		out.AdditionalProperties = &spec.SchemaOrBool{
			Allows: in.AdditionalProperties.Allows,
			Schema: c.convert(in.AdditionalProperties.Schema),
		}
	}
	if in.Items != nil {
		out.Items = &spec.SchemaOrArray{Schema: c.convert(in.Items.Schema)}
		for i := range in.Items.JSONSchemas {
			out.Items.Schemas = append(out.Items.Schemas, *c.convert(&in.Items.JSONSchemas[i]))
		}
	}
	if !c.forDefaults {
		stripUnsupportedFormat(out)
	}
	// $ref, definitions, patternProperties and dependencies are rejected by
	// CheckStructural; kube-openapi would panic on a $ref.
	return out
}

// Validator checks objects against one schema. Build it once per schema
// version and share it: it is safe for concurrent use.
type Validator struct {
	schema   *apiextensionsv1.JSONSchemaProps
	openapi  *validate.SchemaValidator
	noSchema bool
}

// NewValidator prepares the kube-openapi validator for s. A nil s accepts
// everything.
func NewValidator(s *apiextensionsv1.JSONSchemaProps) *Validator {
	if s == nil {
		return &Validator{noSchema: true}
	}
	return &Validator{
		schema:  s,
		openapi: validate.NewSchemaValidator(converter{}.convert(s), nil, "", strfmt.Default),
	}
}

// Validate is the package-level Validate with a prepared schema.
func (v *Validator) Validate(obj any, fld *field.Path) field.ErrorList {
	if v == nil || v.noSchema {
		return nil
	}
	errs := openapiResultErrors(fld, v.openapi.Validate(obj))
	errs = append(errs, validateEmbedded(fld, obj, v.schema)...)
	errs = append(errs, validateListSetsAndMaps(fld, v.schema, obj)...)
	return errs
}

// openapiValidate runs only the value validation, for defaults.
func openapiValidate(s *apiextensionsv1.JSONSchemaProps, obj any, fld *field.Path) field.ErrorList {
	sv := validate.NewSchemaValidator(converter{forDefaults: true}.convert(s), nil, "", strfmt.Default)
	return openapiResultErrors(fld, sv.Validate(obj))
}

// openapiResultErrors maps kube-openapi results to field errors as
// upstream's kubeOpenAPIResultToFieldErrors does.
func openapiResultErrors(fld *field.Path, result *validate.Result) field.ErrorList {
	if result == nil || result.IsValid() {
		return nil
	}
	var errs field.ErrorList
	for _, e := range result.Errors {
		ve, ok := e.(*openapierrors.Validation)
		if !ok {
			errs = append(errs, field.Invalid(fld, "", e.Error()))
			continue
		}
		p := fld
		if ve.Name != "" && ve.Name != "." {
			p = p.Child(strings.TrimPrefix(ve.Name, "."))
		}
		errs = append(errs, validationError(p, ve))
	}
	return errs
}

func validationError(p *field.Path, ve *openapierrors.Validation) *field.Error {
	value := any("")
	if ve.Value != nil {
		value = ve.Value
	}
	asInt := func(x any) int {
		if i, ok := x.(int64); ok {
			return int(i)
		}
		return -1
	}
	switch ve.Code() {
	case openapierrors.RequiredFailCode:
		return field.Required(p, "")
	case openapierrors.EnumFailCode:
		values := []string{}
		for _, allowed := range ve.Values {
			if s, ok := allowed.(string); ok {
				values = append(values, s)
			} else {
				b, _ := json.Marshal(allowed)
				values = append(values, string(b))
			}
		}
		return field.NotSupported(p, ve.Value, values)
	case openapierrors.TooLongFailCode:
		return field.TooLong(p, "", asInt(ve.Valid))
	case openapierrors.MaxItemsFailCode, openapierrors.TooManyPropertiesCode:
		return field.TooMany(p, asInt(ve.Value), asInt(ve.Valid))
	case openapierrors.InvalidTypeCode:
		return field.TypeInvalid(p, value, ve.Error())
	default:
		return field.Invalid(p, value, ve.Error())
	}
}
