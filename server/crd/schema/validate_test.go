package schema

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// schemaFoo is the schema of the CustomResourcePublishOpenAPI conformance
// test "works for CRD with validation schema".
const schemaFoo = `
type: object
properties:
  spec:
    type: object
    properties:
      bars:
        type: array
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            age: {type: string}
            feeling: {type: string, enum: [Great, Down]}
            bazs: {type: array, items: {type: string}}
`

func TestValidate_ValueValidations_UpstreamMessages(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		obj    string
		want   []string
	}{
		{"type mismatch names field and value", `
type: object
properties:
  spec: {type: object, properties: {replicas: {type: integer}}}`,
			`{"spec":{"replicas":"string"}}`,
			[]string{`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`}},
		{"required missing", schemaFoo, `{"spec":{"bars":[{"age":"10"}]}}`,
			[]string{`spec.bars[0].name: Required value`}},
		{"enum", schemaFoo, `{"spec":{"bars":[{"name":"a","feeling":"NonExistentValue"}]}}`,
			[]string{`spec.bars[0].feeling: Unsupported value: "NonExistentValue": supported values: "Great", "Down"`}},
		{"valid object passes", schemaFoo, `{"spec":{"bars":[{"name":"a","feeling":"Great","bazs":["x"]}]}}`, nil},
		{"pattern", `
type: object
properties: {s: {type: string, pattern: "^a+$"}}`, `{"s":"b"}`,
			[]string{`s: Invalid value: "b": s in body should match '^a+$'`}},
		{"maxLength", `
type: object
properties: {s: {type: string, maxLength: 2}}`, `{"s":"abc"}`,
			[]string{`s: Too long: may not be more than 2 bytes`}},
		{"minLength", `
type: object
properties: {s: {type: string, minLength: 2}}`, `{"s":"a"}`,
			[]string{`s: Invalid value: "a": s in body should be at least 2 chars long`}},
		{"maxItems", `
type: object
properties: {l: {type: array, maxItems: 1, items: {type: integer}}}`, `{"l":[1,2]}`,
			[]string{`l: Too many: 2: must have at most 1 item`}},
		{"minItems", `
type: object
properties: {l: {type: array, minItems: 2, items: {type: integer}}}`, `{"l":[1]}`,
			[]string{`l: Invalid value: 1: l in body should have at least 2 items`}},
		{"maxProperties", `
type: object
properties: {m: {type: object, maxProperties: 1, additionalProperties: {type: string}}}`, `{"m":{"a":"1","b":"2"}}`,
			[]string{`m: Too many: 2: must have at most 1 item`}},
		{"minProperties", `
type: object
properties: {m: {type: object, minProperties: 1, additionalProperties: {type: string}}}`, `{"m":{}}`,
			[]string{`m: Invalid value: 0: m in body should have at least 1 properties`}},
		{"minimum", `
type: object
properties: {i: {type: integer, minimum: 3}}`, `{"i":2}`,
			[]string{`i: Invalid value: 2: i in body should be greater than or equal to 3`}},
		{"exclusiveMaximum", `
type: object
properties: {i: {type: integer, maximum: 3, exclusiveMaximum: true}}`, `{"i":3}`,
			[]string{`i: Invalid value: 3: i in body should be less than 3`}},
		{"multipleOf", `
type: object
properties: {num: {type: number, multipleOf: 2}}`, `{"num":3}`,
			[]string{`num: Invalid value: 3: num in body should be a multiple of 2`}},
		{"additionalProperties schema applies to every value", `
type: object
properties: {m: {type: object, additionalProperties: {type: integer}}}`, `{"m":{"a":"x"}}`,
			[]string{`m.a: Invalid value: "string": m.a in body must be of type integer: "string"`}},
		{"null not allowed without nullable", `
type: object
properties: {s: {type: string}}`, `{"s":null}`,
			[]string{`s: Invalid value: "null": s in body must be of type string: "null"`}},
		{"null allowed with nullable", `
type: object
properties: {s: {type: string, nullable: true}}`, `{"s":null}`, nil},
		{"int-or-string accepts both", `
type: object
properties: {p: {x-kubernetes-int-or-string: true}}`, `{"p":"http"}`, nil},
		{"int-or-string rejects others", `
type: object
properties: {p: {x-kubernetes-int-or-string: true}}`, `{"p":true}`,
			[]string{`p: Invalid value: "boolean": p in body must be of type integer,string: "boolean"`}},
		{"supported format validated", `
type: object
properties: {ip: {type: string, format: ipv4}}`, `{"ip":"nope"}`,
			[]string{`ip: Invalid value: "nope": ip in body must be of type ipv4: "nope"`}},
		{"k8s-short-name format validated", `
type: object
properties: {short: {type: string, format: k8s-short-name}}`, `{"short":"Not_A_Name"}`,
			[]string{`short: Invalid value: "Not_A_Name": short in body must be of type k8s-short-name: "Not_A_Name"`}},
		{"unsupported format ignored", `
type: object
properties: {s: {type: string, format: no-such-format}}`, `{"s":"anything"}`, nil},
		{"int32 format on integers kept, others dropped", `
type: object
properties: {i: {type: integer, format: uuid}}`, `{"i":5}`, nil},
		{"allOf", `
type: object
properties: {s: {type: string, allOf: [{minLength: 2}, {maxLength: 3}]}}`, `{"s":"abcd"}`,
			// a composite error has no field path upstream either
			[]string{`s: Too long: may not be more than 3 bytes`, `<nil>: Invalid value: "": "s" must validate all the schemas (allOf)`}},
		{"anyOf none matches", `
type: object
properties: {i: {type: integer, anyOf: [{minimum: 10}, {maximum: 0}]}}`, `{"i":5}`,
			[]string{`<nil>: Invalid value: "": "i" must validate at least one schema (anyOf)`, `i: Invalid value: 5: i in body should be greater than or equal to 10`}},
		{"oneOf both match", `
type: object
properties: {i: {type: integer, oneOf: [{minimum: 0}, {maximum: 10}]}}`, `{"i":5}`,
			[]string{`<nil>: Invalid value: "": "i" must validate one and only one schema (oneOf). Found 2 valid alternatives`}},
		{"not", `
type: object
properties: {s: {type: string, not: {enum: [bad]}}}`, `{"s":"bad"}`,
			[]string{`<nil>: Invalid value: "": "s" must not validate the schema (not)`}},
		{"uniqueItems", `
type: object
properties: {l: {type: array, uniqueItems: true, items: {type: integer}}}`, `{"l":[1,1]}`,
			[]string{`l: Invalid value: "": l in body shouldn't contain duplicates`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := Validate(mustSchema(t, tt.schema), mustObj(t, tt.obj), nil)
			expectErrors(t, errs, tt.want)
		})
	}
}

func TestValidate_FieldPathPrefix_NamesFieldBelowIt(t *testing.T) {
	s := mustSchema(t, `{type: object, properties: {replicas: {type: integer}}}`)
	errs := Validate(s, mustObj(t, `{"replicas":"x"}`), field.NewPath("status"))
	expectErrors(t, errs, []string{`status.replicas: Invalid value: "string": replicas in body must be of type integer: "string"`})
}

func TestValidate_NilSchema_AcceptsAnything(t *testing.T) {
	if errs := Validate(nil, mustObj(t, `{"a":1}`), nil); len(errs) != 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
}

func TestValidator_Reuse_GivesSameResult(t *testing.T) {
	v := NewValidator(mustSchema(t, schemaFoo))
	for i := 0; i < 2; i++ {
		expectErrors(t, v.Validate(mustObj(t, `{"spec":{"bars":[{}]}}`), nil), []string{`spec.bars[0].name: Required value`})
	}
}
