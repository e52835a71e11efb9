package schema

import "testing"

// The cases follow upstream's CRD validation tests "invalid defaults with
// enabled feature gate, structural schema" and "embedded metadata defaults".
func TestCheckStructural_Defaults_MustValidateAndBePruned(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []string
	}{
		{"valid defaults", `
type: object
properties:
  b: {type: object, properties: {foo: {type: string}}, default: {foo: abc}}
  s: {type: string, default: x, enum: [x, y]}`, nil},
		{"default with an unknown field", `
type: object
properties:
  a: {type: object, properties: {foo: {type: string}}, default: {foo: abc, bar: 42}}`,
			[]string{sp + `.properties[a].default: Invalid value: {"bar":42,"foo":"abc"}: must not have unknown fields`}},
		{"default of the wrong type", `
type: object
properties:
  c: {type: object, properties: {foo: {type: string}}, default: {foo: 42}}`,
			[]string{sp + `.properties[c].default.foo: Invalid value: "integer": foo in body must be of type string: "integer"`}},
		{"default failing a value validation", `
type: object
properties:
  d:
    type: object
    properties: {good: {type: string, pattern: a}, bad: {type: string, pattern: b}}
    default: {good: a, bad: a}`,
			[]string{sp + `.properties[d].default.bad: Invalid value: "a": bad in body should match 'b'`}},
		{"defaults below preserve-unknown-fields must be pruned too", `
type: object
properties:
  e:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    properties:
      preserveUnknownFields: {type: object, default: {foo: abc}}
      nestedProperties: {type: object, properties: {foo: {type: string}}, default: {foo: abc, bar: 42}}`,
			[]string{
				sp + `.properties[e].properties[nestedProperties].default: Invalid value: {"bar":42,"foo":"abc"}: must not have unknown fields`,
				sp + `.properties[e].properties[preserveUnknownFields].default: Invalid value: {"foo":"abc"}: must not have unknown fields`,
			}},
		{"embedded default keeps TypeMeta and unknown ObjectMeta fields", `
type: object
properties:
  embedded:
    type: object
    x-kubernetes-embedded-resource: true
    x-kubernetes-preserve-unknown-fields: true
    properties: {foo: {type: string}}
    default: {foo: abc, apiVersion: foo/v1, kind: v1, metadata: {name: foo, unspecified: bar}, bar: 42}`, nil},
		{"embedded default with an unknown field", `
type: object
properties:
  u:
    type: object
    x-kubernetes-embedded-resource: true
    properties: {something: {type: string}}
    default: {apiVersion: v1, kind: Pod, metadata: {name: foo, unknown: 42}, unknown: 42}`,
			[]string{sp + `.properties[u].default: Invalid value: {"apiVersion":"v1","kind":"Pod","metadata":{"name":"foo","unknown":42},"unknown":42}: must not have unknown fields`}},
		{"embedded default with a wrongly typed kind", `
type: object
properties:
  w:
    type: object
    x-kubernetes-embedded-resource: true
    properties: {something: {type: string}}
    default: {kind: 42}`,
			[]string{sp + `.properties[w].default.kind: Invalid value: 42: must be a string`}},
		{"embedded default with an invalid name", `
type: object
properties:
  w:
    type: object
    x-kubernetes-embedded-resource: true
    properties: {something: {type: string}}
    default: {apiVersion: v1, kind: Foo, metadata: {name: "%"}}`,
			[]string{sp + `.properties[w].default.metadata.name: Invalid value: "%": may not contain '%'`}},
		{"embedded default with wrongly typed metadata", `
type: object
properties:
  w:
    type: object
    x-kubernetes-embedded-resource: true
    properties: {something: {type: string}}
    default: {metadata: 42}`,
			[]string{sp + `.properties[w].default.metadata: Invalid value: 42: json: cannot unmarshal number into Go value of type v1.ObjectMeta`}},
		{"defaults inside embedded metadata must result in valid metadata", `
type: object
properties:
  w:
    type: object
    x-kubernetes-embedded-resource: true
    properties:
      kind: {type: string, default: "%"}
      metadata:
        type: object
        properties:
          name: {type: string, default: 42}
          labels: {type: object, additionalProperties: {type: string}, default: {foo: "x y"}}`,
			[]string{
				sp + `.properties[w].properties[kind].default: Invalid value: "%": must result in valid metadata: kind: Invalid value: "%": may have mixed case, but should otherwise match`,
				sp + `.properties[w].properties[metadata].properties[labels].default: Invalid value: {"foo":"x y"}: must result in valid metadata: metadata.labels: Invalid value: "x y"`,
				sp + `.properties[w].properties[metadata].properties[name].default: Invalid value: 42: must result in valid metadata: metadata: Invalid value: {"name":42}: json: cannot unmarshal number`,
			}},
		{"allowed defaults inside embedded metadata", `
type: object
properties:
  w:
    type: object
    x-kubernetes-embedded-resource: true
    properties:
      apiVersion: {type: string, default: v1}
      kind: {type: string, default: Pod}
      metadata:
        type: object
        properties: {name: {type: string, default: foo}}
        default: {unknown: 42}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrors(t, CheckStructural(mustSchema(t, tt.schema), schemaPath, true), tt.want)
		})
	}
}

func TestCheckStructural_DefaultsNotCheckedWhenNotStructural(t *testing.T) {
	// as upstream: the structural errors come alone
	s := mustSchema(t, `
type: object
properties:
  a: {default: 42}`)
	expectErrors(t, CheckStructural(s, schemaPath, true), []string{
		sp + ".properties[a].type: Required value: must not be empty for specified object fields",
	})
}
