package schema

import (
	"reflect"
	"testing"
)

func TestPrune_UnknownFields_RemovedAndReported(t *testing.T) {
	tests := []struct {
		name        string
		schema      string
		root        bool
		obj         string
		want        string
		wantUnknown []string
	}{
		{"unknown field below spec, the kubectl conformance case", schemaFoo, true,
			`{"apiVersion":"g/v1","kind":"Foo","metadata":{"name":"x"},"spec":{"foo":true}}`,
			`{"apiVersion":"g/v1","kind":"Foo","metadata":{"name":"x"},"spec":{}}`,
			[]string{"spec.foo"}},
		{"unknown root field", schemaFoo, true,
			`{"apiVersion":"g/v1","kind":"Foo","metadata":{"name":"x"},"unknownField":"unknown"}`,
			`{"apiVersion":"g/v1","kind":"Foo","metadata":{"name":"x"}}`,
			[]string{"unknownField"}},
		{"paths inside lists carry the index, sorted", schemaFoo, true,
			`{"spec":{"bars":[{"name":"a","x":1},{"name":"b","y":{"z":1}}]},"zzz":1}`,
			`{"spec":{"bars":[{"name":"a"},{"name":"b"}]}}`,
			[]string{"spec.bars[0].x", "spec.bars[1].y", "zzz"}},
		{"not a resource root: apiVersion, kind and metadata are unknown too", schemaFoo, false,
			`{"apiVersion":"v1","metadata":{},"spec":{}}`,
			`{"spec":{}}`,
			// at the top level upstream drops them silently
			nil},
		{"nested metadata is an ordinary unknown field", schemaFoo, true,
			`{"spec":{"metadata":{"a":1}}}`,
			`{"spec":{}}`,
			[]string{"spec.metadata"}},
		{"preserve-unknown-fields keeps everything below", `
type: object
properties:
  spec: {type: object, x-kubernetes-preserve-unknown-fields: true}`, true,
			`{"spec":{"a":{"b":[1,{"c":2}]}}}`,
			`{"spec":{"a":{"b":[1,{"c":2}]}}}`, nil},
		{"preserve-unknown-fields at the root keeps unknown root fields", `
type: object
x-kubernetes-preserve-unknown-fields: true`, true,
			`{"apiVersion":"v1","kind":"K","metadata":{},"anything":{"x":1}}`,
			`{"apiVersion":"v1","kind":"K","metadata":{},"anything":{"x":1}}`, nil},
		{"declared properties below preserve-unknown-fields are pruned again", `
type: object
properties:
  spec:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    properties:
      strict: {type: object, properties: {a: {type: string}}}`, true,
			`{"spec":{"free":{"x":1},"strict":{"a":"1","b":"2"}}}`,
			`{"spec":{"free":{"x":1},"strict":{"a":"1"}}}`,
			[]string{"spec.strict.b"}},
		{"additionalProperties schema prunes every value", `
type: object
properties:
  m: {type: object, additionalProperties: {type: object, properties: {a: {type: string}}}}`, true,
			`{"m":{"k1":{"a":"x","b":"y"}}}`,
			`{"m":{"k1":{"a":"x"}}}`,
			[]string{"m.k1.b"}},
		{"additionalProperties true keeps keys but prunes their objects", `
type: object
properties:
  m: {type: object, additionalProperties: true}`, true,
			`{"m":{"k1":"v","k2":{"a":1}}}`,
			`{"m":{"k1":"v","k2":{}}}`,
			[]string{"m.k2.a"}},
		{"embedded resource keeps its apiVersion, kind and metadata", `
type: object
properties:
  t:
    type: object
    x-kubernetes-embedded-resource: true
    properties: {spec: {type: object}}`, true,
			`{"t":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"x":1},"other":1}}`,
			`{"t":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}}`,
			[]string{"t.other", "t.spec.x"}},
		{"non-nullable nulls without default are dropped, others kept", `
type: object
properties:
  a: {type: string}
  b: {type: string, nullable: true}
  c: {type: string, default: "C"}`, true,
			`{"a":null,"b":null,"c":null}`,
			`{"b":null,"c":null}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := mustMap(t, tt.obj)
			unknown := Prune(mustSchema(t, tt.schema), obj, tt.root)
			expectJSON(t, obj, tt.want)
			if !reflect.DeepEqual(unknown, tt.wantUnknown) {
				t.Errorf("unknown = %q, want %q", unknown, tt.wantUnknown)
			}
		})
	}
}

func TestPrune_NilSchemaAtRoot_KeepsOnlyTypeAndObjectMeta(t *testing.T) {
	obj := mustMap(t, `{"apiVersion":"v1","kind":"K","metadata":{"name":"a"},"spec":{"x":1}}`)
	unknown := Prune(nil, obj, true)
	expectJSON(t, obj, `{"apiVersion":"v1","kind":"K","metadata":{"name":"a"}}`)
	if !reflect.DeepEqual(unknown, []string{"spec"}) {
		t.Errorf("unknown = %q", unknown)
	}
}
