package schema

import "testing"

func TestDefault_Algorithm_AsUpstream(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		obj    string
		want   string
	}{
		{"absent properties get defaults, present ones are kept", `
type: object
properties:
  a: {type: string, default: "A"}
  b: {type: string, default: "B"}`,
			`{"a":"x"}`, `{"a":"x","b":"B"}`},
		{"integers stay int64", `
type: object
properties: {replicas: {type: integer, default: 1}}`,
			`{}`, `{"replicas":1}`},
		{"defaults apply top-down: a defaulted object is defaulted inside", `
type: object
properties:
  spec:
    type: object
    default: {}
    properties:
      a: {type: string, default: "A"}
      nested: {type: object, default: {x: 1}, properties: {x: {type: integer}, z: {type: integer, default: 2}}}`,
			`{}`, `{"spec":{"a":"A","nested":{"x":1,"z":2}}}`},
		{"items and additionalProperties are defaulted per element", `
type: object
properties:
  list: {type: array, items: {type: object, properties: {a: {type: string, default: "A"}}}}
  map: {type: object, additionalProperties: {type: object, properties: {b: {type: string, default: "B"}}}}`,
			`{"list":[{},{"a":"x"}],"map":{"k":{}}}`,
			`{"list":[{"a":"A"},{"a":"x"}],"map":{"k":{"b":"B"}}}`},
		{"non-nullable null is replaced by the default", `
type: object
properties: {a: {type: string, default: "A"}}`,
			`{"a":null}`, `{"a":"A"}`},
		{"nullable null is kept", `
type: object
properties: {a: {type: string, nullable: true, default: "A"}}`,
			`{"a":null}`, `{"a":null}`},
		{"null item of non-nullable items is defaulted", `
type: object
properties: {l: {type: array, items: {type: string, default: "D"}}}`,
			`{"l":["x",null]}`, `{"l":["x","D"]}`},
		{"null value of non-nullable additionalProperties is defaulted", `
type: object
properties: {m: {type: object, additionalProperties: {type: string, default: "D"}}}`,
			`{"m":{"k":null}}`, `{"m":{"k":"D"}}`},
		{"empty values are not replaced", `
type: object
properties: {a: {type: string, default: "A"}, b: {type: array, items: {type: string}, default: ["x"]}}`,
			`{"a":"","b":[]}`, `{"a":"","b":[]}`},
		{"a default of null means no default", `
type: object
properties: {a: {type: string, default: null}}`,
			`{}`, `{}`},
		{"defaults below preserve-unknown-fields still apply to declared fields", `
type: object
x-kubernetes-preserve-unknown-fields: true
properties: {a: {type: string, default: "A"}}`,
			`{"free":1}`, `{"free":1,"a":"A"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := mustObj(t, tt.obj)
			Default(mustSchema(t, tt.schema), obj)
			expectJSON(t, obj, tt.want)
		})
	}
}

func TestDefault_TwoObjects_DoNotShareDefaultValues(t *testing.T) {
	s := mustSchema(t, `
type: object
properties: {spec: {type: object, default: {list: [1]}, properties: {list: {type: array, items: {type: integer}}}}}`)
	a, b := mustMap(t, `{}`), mustMap(t, `{}`)
	Default(s, a)
	Default(s, b)
	a["spec"].(map[string]any)["list"].([]any)[0] = int64(99)
	expectJSON(t, b, `{"spec":{"list":[1]}}`)
}
