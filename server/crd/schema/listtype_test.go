package schema

import "testing"

// portsSchema is the ports list of the FieldValidation conformance tests.
const portsSchema = `
type: object
properties:
  spec:
    type: object
    properties:
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [containerPort, protocol]
        items:
          type: object
          required: [containerPort, protocol]
          properties:
            containerPort: {type: integer, format: int32}
            protocol: {type: string}
            name: {type: string}
`

func TestValidate_ListTypes_DuplicatesAsUpstream(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		obj    string
		want   []string
	}{
		{"map list with distinct keys passes", portsSchema,
			`{"spec":{"ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":80,"protocol":"UDP"}]}}`, nil},
		{"map list with repeated compound key", portsSchema,
			`{"spec":{"ports":[{"containerPort":80,"protocol":"TCP","name":"a"},{"containerPort":80,"protocol":"TCP","name":"b"}]}}`,
			[]string{`spec.ports[1]: Duplicate value: {"containerPort":80,"protocol":"TCP"}`}},
		{"map list with one key", `
type: object
properties:
  l:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name]
    items: {type: object, required: [name], properties: {name: {type: string}, v: {type: integer}}}`,
			`{"l":[{"name":"a","v":1},{"name":"b"},{"name":"a","v":2},{"name":"a"}]}`,
			// only the second appearance is reported
			[]string{`l[2]: Duplicate value: {"name":"a"}`}},
		{"map list element must be an object", `
type: object
properties:
  l:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name]
    x-kubernetes-preserve-unknown-fields: true
    items: {x-kubernetes-preserve-unknown-fields: true}`,
			`{"l":[{"name":"a"},"x"]}`,
			[]string{`l[1]: Invalid value: "x": must be an object for an array of list-type map`}},
		{"set of scalars", `
type: object
properties: {s: {type: array, x-kubernetes-list-type: set, items: {type: string}}}`,
			`{"s":["a","b","a","a","b"]}`,
			[]string{`s[2]: Duplicate value: "a"`, `s[4]: Duplicate value: "b"`}},
		{"set of atomic objects compares whole values", `
type: object
properties:
  s:
    type: array
    x-kubernetes-list-type: set
    items: {type: object, x-kubernetes-map-type: atomic, properties: {a: {type: integer}}}`,
			`{"s":[{"a":1},{"a":2},{"a":1}]}`,
			[]string{`s[2]: Duplicate value: {"a":1}`}},
		{"atomic list may repeat", `
type: object
properties: {s: {type: array, x-kubernetes-list-type: atomic, items: {type: string}}}`,
			`{"s":["a","a"]}`, nil},
		{"nested lists below additionalProperties", `
type: object
properties:
  m:
    type: object
    additionalProperties: {type: array, x-kubernetes-list-type: set, items: {type: integer}}`,
			`{"m":{"k":[1,1]}}`,
			[]string{`m[k][1]: Duplicate value: 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrors(t, Validate(mustSchema(t, tt.schema), mustObj(t, tt.obj), nil), tt.want)
		})
	}
}
