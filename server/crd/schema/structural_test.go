package schema

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var schemaPath = field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema")

const sp = "spec.versions[0].schema.openAPIV3Schema"

func TestCheckStructural_StructuralRules_UpstreamMessages(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []string
	}{
		{"the conformance schema is structural", schemaFoo, nil},
		{"type required at the root", `properties: {a: {type: string}}`,
			[]string{sp + ".type: Required value: must not be empty at the root"}},
		{"type required for fields and items", `
type: object
properties:
  a: {}
  l: {type: array, items: {}}`,
			[]string{
				sp + ".properties[a].type: Required value: must not be empty for specified object fields",
				sp + ".properties[l].items.type: Required value: must not be empty for specified array items",
			}},
		{"root must be an object", `type: string`,
			[]string{sp + `.type: Invalid value: "string": must be object at the root`}},
		{"arrays need items", `
type: object
properties: {l: {type: array}}`,
			[]string{sp + ".properties[l].items: Required value: must be specified"}},
		{"no type needed under preserve-unknown-fields or int-or-string", `
type: object
properties:
  free: {x-kubernetes-preserve-unknown-fields: true}
  port: {x-kubernetes-int-or-string: true}`, nil},
		{"int-or-string with its anyOf pattern is structural", `
type: object
properties:
  port:
    x-kubernetes-int-or-string: true
    anyOf: [{type: integer}, {type: string}]
  port2:
    x-kubernetes-int-or-string: true
    allOf: [{anyOf: [{type: integer}, {type: string}]}, {pattern: "^[0-9a-z]+$"}]`, nil},
		{"types under junctors are not structural", `
type: object
properties:
  a:
    type: string
    anyOf: [{type: string}, {maxLength: 2}]
    oneOf: [{type: integer}, {type: string}, {type: boolean}]`,
			[]string{
				sp + ".properties[a].anyOf[0].type: Forbidden: must be empty to be structural",
				sp + ".properties[a].oneOf[0].type: Forbidden: must be empty to be structural",
				sp + ".properties[a].oneOf[1].type: Forbidden: must be empty to be structural",
				sp + ".properties[a].oneOf[2].type: Forbidden: must be empty to be structural",
			}},
		{"forbidden generic and extension fields under junctors", `
type: object
properties:
  a:
    type: object
    properties: {b: {type: string}}
    allOf:
    - description: d
      title: t
      nullable: true
      default: {}
      x-kubernetes-preserve-unknown-fields: true
      x-kubernetes-map-type: atomic
      additionalProperties: {type: string}`,
			[]string{
				sp + ".properties[a].allOf[0].additionalProperties: Forbidden: must be undefined to be structural",
				sp + ".properties[a].allOf[0].default: Forbidden: must be undefined to be structural",
				sp + ".properties[a].allOf[0].description: Forbidden: must be empty to be structural",
				sp + ".properties[a].allOf[0].nullable: Forbidden: must be false to be structural",
				sp + ".properties[a].allOf[0].title: Forbidden: must be empty to be structural",
				sp + ".properties[a].allOf[0].x-kubernetes-map-type: Forbidden: must be undefined to be structural",
				sp + ".properties[a].allOf[0].x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural",
				// the OpenAPI rules look under junctors too
				sp + ".properties[a].allOf[0].type: Required value: must be object if x-kubernetes-map-type is specified",
			}},
		{"junctors may only speak about declared properties", `
type: object
properties: {a: {type: string}}
anyOf:
- properties: {a: {minLength: 1}}
- properties: {b: {minLength: 1}}
not: {properties: {metadata: {}}}`,
			[]string{
				sp + ".not.properties[metadata]: Forbidden: must not be specified in a nested context",
				sp + ".properties[b]: Required value: because it is defined in " + sp + ".anyOf[1].properties[b]",
				sp + ".properties[metadata]: Required value: because it is defined in " + sp + ".not.properties[metadata]",
			}},
		{"invalid pattern", `
type: object
properties: {a: {type: string, pattern: "("}}`,
			[]string{sp + `.properties[a].pattern: Invalid value: "(": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): ` + "`(`"}},
		{"root metadata may only restrict name and generateName", `
type: object
properties:
  metadata:
    type: object
    properties: {name: {type: string, maxLength: 10}, labels: {type: object}}`,
			[]string{sp + ".properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"}},
		{"root metadata with name and generateName only is fine", `
type: object
properties:
  metadata:
    type: object
    properties: {name: {type: string, maxLength: 10}, generateName: {type: string}}`, nil},
		{"root metadata, kind and apiVersion types", `
type: object
properties:
  metadata: {type: string}
  kind: {type: integer}
  apiVersion: {type: integer}`,
			[]string{
				sp + `.properties[apiVersion].type: Invalid value: "integer": must be string`,
				sp + `.properties[kind].type: Invalid value: "integer": must be string`,
				sp + `.properties[metadata].type: Invalid value: "string": must be object`,
			}},
		{"additionalProperties forbidden at the root", `
type: object
additionalProperties: {type: string}`,
			[]string{sp + ".additionalProperties: Forbidden: must not be used at the root"}},
		{"embedded resource must be an object with properties or preserve-unknown-fields", `
type: object
properties:
  e1: {x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
  e2: {type: object, x-kubernetes-embedded-resource: true}
  e3: {type: object, x-kubernetes-embedded-resource: true, additionalProperties: {type: string}}`,
			[]string{
				sp + ".properties[e1].type: Required value: must be object if x-kubernetes-embedded-resource is true",
				sp + ".properties[e2].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
				sp + ".properties[e3].additionalProperties: Forbidden: must not be used if x-kubernetes-embedded-resource is set",
				sp + ".properties[e3].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
			}},
		{"int-or-string excludes preserve-unknown-fields and embedded-resource", `
type: object
properties:
  a: {x-kubernetes-int-or-string: true, x-kubernetes-preserve-unknown-fields: true}`,
			[]string{sp + ".properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrors(t, CheckStructural(mustSchema(t, tt.schema), schemaPath, true), tt.want)
		})
	}
}

func TestCheckStructural_OpenAPIRules_UpstreamMessages(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []string
	}{
		{"nullable at the root", `{type: object, nullable: true}`,
			[]string{sp + ".nullable: Forbidden: nullable cannot be true at the root"}},
		{"uniqueItems", `
type: object
properties: {l: {type: array, uniqueItems: true, items: {type: string}}}`,
			[]string{sp + ".properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"}},
		{"unknown type", `
type: object
properties: {a: {type: foo}}`,
			[]string{sp + `.properties[a].type: Unsupported value: "foo": supported values: "array", "boolean", "integer", "number", "object", "string"`}},
		{"null type", `
type: object
properties: {a: {type: "null"}}`,
			[]string{
				sp + `.properties[a].type: Unsupported value: "null"`,
				sp + ".properties[a].type: Forbidden: type cannot be set to null, use nullable as an alternative",
			}},
		{"properties and additionalProperties are exclusive", `
type: object
properties:
  a: {type: object, properties: {b: {type: string}}, additionalProperties: {type: string}}`,
			[]string{sp + ".properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"}},
		{"unsupported $ref reported by the OpenAPI rules only", `
type: object
properties: {a: {type: string, $ref: "#/x"}}`,
			[]string{sp + ".properties[a].$ref: Forbidden: $ref is not supported"}},
		{"preserve-unknown-fields false", `
type: object
x-kubernetes-preserve-unknown-fields: false`,
			[]string{sp + ".x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"}},
		{"top-level metadata default", `
type: object
properties: {metadata: {type: object, default: {name: foo}}}`,
			[]string{sp + ".properties[metadata].default: Forbidden: must not be set in top-level metadata"}},
		{"no defaults in additionalProperties inside embedded metadata", `
type: object
properties:
  e:
    type: object
    x-kubernetes-embedded-resource: true
    properties:
      metadata:
        type: object
        properties:
          annotations: {type: object, additionalProperties: {type: string, default: abc}}`,
			[]string{sp + ".properties[e].properties[metadata].properties[annotations].additionalProperties.default: Forbidden: must not be set inside additionalProperties applying to object metadata"}},
		{"embedded resource inside resource meta", `
type: object
properties:
  e:
    type: object
    x-kubernetes-embedded-resource: true
    properties:
      metadata: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}`,
			[]string{sp + ".properties[e].properties[metadata].x-kubernetes-embedded-resource: Forbidden: must not be used inside of resource meta"}},
		{"map-type needs an object and a known value", `
type: object
properties:
  a: {type: string, x-kubernetes-map-type: atomic}
  b: {type: object, x-kubernetes-map-type: foo}`,
			[]string{
				sp + `.properties[a].type: Invalid value: "string": must be object if x-kubernetes-map-type is specified`,
				sp + `.properties[b].x-kubernetes-map-type: Unsupported value: "foo": supported values: "atomic", "granular"`,
			}},
		{"list-type needs an array and a known value", `
type: object
properties:
  a: {type: string, x-kubernetes-list-type: set}
  b: {type: array, items: {type: string}, x-kubernetes-list-type: foo}`,
			[]string{
				sp + `.properties[a].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified`,
				sp + `.properties[b].x-kubernetes-list-type: Unsupported value: "foo": supported values: "atomic", "set", "map"`,
			}},
		{"set items must be atomic and not nullable", `
type: object
properties:
  s: {type: array, x-kubernetes-list-type: set, items: {type: object, nullable: true, properties: {a: {type: string}}}}`,
			[]string{
				sp + `.properties[s].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set`,
				sp + ".properties[s].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set",
			}},
		{"map list keys", `
type: object
properties:
  noKeys: {type: array, x-kubernetes-list-type: map, items: {type: object, properties: {a: {type: string}}}}
  keysNoMap: {type: array, x-kubernetes-list-map-keys: [a], items: {type: object, required: [a], properties: {a: {type: string}}}}
  badKeys:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [a, missing, o, opt]
    items:
      type: object
      required: [a, o]
      properties: {a: {type: string}, o: {type: object}, opt: {type: string, nullable: true}}
  scalarItems: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [a], items: {type: string}}`,
			[]string{
				sp + `.properties[badKeys].x-kubernetes-list-map-keys: Invalid value: ["a","missing","o","opt"]: entries must all be names of item properties`,
				sp + `.properties[badKeys].items.properties[o].type: Invalid value: "object": must be a scalar type if parent array's x-kubernetes-list-type is map`,
				sp + `.properties[badKeys].items.properties[opt].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property`,
				sp + `.properties[badKeys].items.properties[opt].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable`,
				sp + `.properties[keysNoMap].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty`,
				sp + `.properties[noKeys].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map`,
				sp + `.properties[scalarItems].items.type: Invalid value: "string": must be object if parent array's x-kubernetes-list-type is map`,
			}},
		{"the FieldValidation conformance ports list is valid", portsSchema, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrors(t, CheckStructural(mustSchema(t, tt.schema), schemaPath, true), tt.want)
		})
	}
}

func TestCheckStructural_UnsupportedOnlyFeature_GenericMessageWhenAlone(t *testing.T) {
	// items as an array is caught by both sets of rules; the OpenAPI one wins
	s := mustSchema(t, `
type: object
properties: {l: {type: array, items: [{type: string}]}}`)
	expectErrors(t, CheckStructural(s, schemaPath, true), []string{
		sp + ".properties[l].items: Forbidden: items must be a schema object and not an array",
	})
}

// Schemas of the CustomResourcePublishOpenAPI conformance tests.
const (
	schemaWaldo = `
description: Waldo CRD for Testing
type: object
properties:
  spec:
    description: Specification of Waldo
    type: object
    properties:
      dummy: {description: Dummy property., type: object}
  status:
    description: Status of Waldo
    type: object
    properties:
      bars: {description: List of Bars and their statuses., type: array, items: {type: object}}`
	schemaPreserveRoot = `
description: preserve-unknown-properties at root for Testing
x-kubernetes-preserve-unknown-fields: true
type: object
properties:
  spec: {type: object, properties: {dummy: {type: object}}}`
	schemaPreserveNested = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    properties:
      dummy: {type: object}`
)

func TestCheckStructural_ConformanceSchemas_Accepted(t *testing.T) {
	for name, s := range map[string]string{
		"foo": schemaFoo, "waldo": schemaWaldo, "preserve root": schemaPreserveRoot,
		"preserve nested": schemaPreserveNested, "ports": portsSchema, "embedded": embeddedSchema,
	} {
		t.Run(name, func(t *testing.T) {
			expectErrors(t, CheckStructural(mustSchema(t, s), schemaPath, true), nil)
		})
	}
}

func TestPrune_PreserveNestedConformanceCR_KeptAsSent(t *testing.T) {
	obj := mustMap(t, `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"test-cr"},"spec":{"a":null,"b":[{"c":"d"}]}}`)
	if unknown := Prune(mustSchema(t, schemaPreserveNested), obj, true); len(unknown) != 0 {
		t.Errorf("unknown = %q", unknown)
	}
	expectJSON(t, obj, `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"test-cr"},"spec":{"a":null,"b":[{"c":"d"}]}}`)
}

func TestCheckStatusSubresourceRoot_OnlyAllowedFields(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []string
	}{
		{"allowed fields", `{type: object, description: d, required: [spec], properties: {spec: {type: object}}}`, nil},
		{"root type must be object", `{type: array, items: {type: string}}`,
			[]string{sp + `.type: Invalid value: "array": only "object" is allowed as the type at the root of the schema if the status subresource is enabled`}},
		{"anyOf is not allowed", `{type: object, anyOf: [{required: [spec]}], properties: {spec: {type: object}}}`,
			[]string{`only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrors(t, CheckStatusSubresourceRoot(mustSchema(t, tt.schema), schemaPath), tt.want)
		})
	}
}
