// Package schema applies a CustomResourceDefinition's openAPIV3Schema to
// custom objects as upstream does: the structural-schema rules a CRD's
// schema must meet, validation of an object against it, pruning of fields
// it does not declare, and defaulting. Objects are unstructured JSON
// values (map[string]any, []any, string, int64, float64, bool, nil), as
// decoded by sigs.k8s.io/json with int preservation.
//
// Upstream's order on a write is: Prune, Default, Validate (plus the
// registry's own TypeMeta and root ObjectMeta checks); on a read from
// storage: Prune, Default.
package schema

import (
	"fmt"
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckStructural reports every way s breaks upstream's structural-schema
// rules (types everywhere, no value validations in allOf/anyOf/oneOf/not
// that aren't structural, metadata restricted to name and generateName,
// x-kubernetes-* extension consistency, defaults that validate and are
// pruned) and the other schema rules of upstream's CRD validation for a new
// v1 CRD. isRoot is true for a version's top-level schema. fld is the
// schema's own path (spec.versions[i].schema.openAPIV3Schema). The rules of
// x-kubernetes-validations expressions are not checked here (see
// server/cel), nor the root restrictions of a status subresource (see
// CheckStatusSubresourceRoot).
func CheckStructural(s *apiextensionsv1.JSONSchemaProps, fld *field.Path, isRoot bool) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if isRoot && s.Nullable {
		errs = append(errs, field.Forbidden(fld.Child("nullable"), "nullable cannot be true at the root"))
	}
	lvl := fieldLevel
	if isRoot {
		lvl = rootLevel
	}
	// Unsupported fields are also reported by the OpenAPI checks, with
	// better paths; the generic message only shows when nothing else does.
	var initErrs field.ErrorList
	if err := unsupported(s); err != nil {
		initErrs = field.ErrorList{field.Invalid(fld, "", err.Error())}
	} else if serrs := validateStructural(fld, s, lvl); len(serrs) > 0 {
		errs = append(errs, serrs...)
	} else if derrs, err := validateDefaults(fld, s, isRoot, true); err != nil {
		errs = append(errs, field.Invalid(fld, "", err.Error()))
	} else {
		errs = append(errs, derrs...)
	}
	errs = append(errs, openapiChecker{allowDefaults: true}.check(s, fld, isRoot)...)
	if len(errs) == 0 {
		errs = initErrs
	}
	return errs
}

// allowedWithStatus are the root schema fields that survive extracting
// properties["status"] as the status schema.
var allowedWithStatus = map[string]bool{
	"Description": true, "Type": true, "Format": true, "Title": true, "Maximum": true,
	"ExclusiveMaximum": true, "Minimum": true, "ExclusiveMinimum": true, "MaxLength": true,
	"MinLength": true, "Pattern": true, "MaxItems": true, "MinItems": true, "UniqueItems": true,
	"MultipleOf": true, "Required": true, "Items": true, "Properties": true, "ExternalDocs": true,
	"Example": true, "XPreserveUnknownFields": true, "XValidations": true,
}

var allowedWithStatusList = []string{"Description", "Type", "Format", "Title", "Maximum", "ExclusiveMaximum", "Minimum", "ExclusiveMinimum", "MaxLength", "MinLength", "Pattern", "MaxItems", "MinItems", "UniqueItems", "MultipleOf", "Required", "Items", "Properties", "ExternalDocs", "Example", "XPreserveUnknownFields", "XValidations"}

// CheckStatusSubresourceRoot is upstream's restriction of a root schema
// when the version enables the status subresource: type object and only
// fields whose meaning survives splitting off the status schema.
func CheckStatusSubresourceRoot(s *apiextensionsv1.JSONSchemaProps, fld *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	v := reflect.ValueOf(s).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			continue
		}
		name := v.Type().Field(i).Name
		if name == "Type" {
			if s.Type != "object" {
				return field.ErrorList{field.Invalid(fld.Child("type"), s.Type, `only "object" is allowed as the type at the root of the schema if the status subresource is enabled`)}
			}
			continue
		}
		if !allowedWithStatus[name] {
			return field.ErrorList{field.Invalid(fld, *s, fmt.Sprintf("only %v fields are allowed at the root of the schema if the status subresource is enabled", allowedWithStatusList))}
		}
	}
	return nil
}

// Validate checks obj against s, naming each offending field below fld
// with upstream's messages: the OpenAPI value validations, TypeMeta and
// ObjectMeta of embedded resources, and uniqueness in list-type set and map
// lists. The root's own apiVersion, kind and metadata are the caller's to
// check. Use NewValidator to validate many objects against one schema.
func Validate(s *apiextensionsv1.JSONSchemaProps, obj any, fld *field.Path) field.ErrorList {
	return NewValidator(s).Validate(obj, fld)
}

// Prune removes from obj every field s does not declare (honouring
// x-kubernetes-preserve-unknown-fields and embedded resources) and returns
// the paths it removed ("spec.foo", "spec.bars[0].x"), which
// fieldValidation=Strict reports as `unknown field "spec.foo"`. A resource
// root keeps apiVersion, kind and metadata, and its metadata is left
// untouched: the API server decodes it separately. Like upstream's decoder
// it also drops null values the schema neither allows nor defaults, and
// prunes embedded resources' metadata to ObjectMeta's fields (reporting
// "spec.template.metadata.foo"); embedded metadata that does not decode
// is left for Validate to report.
func Prune(s *apiextensionsv1.JSONSchemaProps, obj map[string]any, isResourceRoot bool) []string {
	if obj == nil {
		return nil
	}
	unknown := pruneOnly(obj, s, isResourceRoot)
	pruneNonNullableNullsWithoutDefaults(obj, s)
	_, metaUnknown := coerce(nil, obj, s, false, false, true)
	return append(unknown, metaUnknown...)
}

// UnknownObjectMetaFields returns the fields of obj["metadata"] that
// metav1.ObjectMeta does not have ("metadata.foo"), which strict field
// validation reports for a resource root as upstream's decoder does. An
// error means the metadata does not decode as ObjectMeta at all.
func UnknownObjectMetaFields(obj map[string]any) ([]string, error) {
	_, _, unknown, err := getObjectMeta(obj, false, true, nil)
	return unknown, err
}

// Default sets the schema's defaults in obj, in place, as upstream does on
// write and on read from storage.
func Default(s *apiextensionsv1.JSONSchemaProps, obj any) {
	applyDefaults(obj, s)
}
