package schema

import "testing"

const embeddedSchema = `
type: object
properties:
  spec:
    type: object
    properties:
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
`

func TestValidate_EmbeddedResource_TypeMetaAndObjectMeta(t *testing.T) {
	tests := []struct {
		name string
		obj  string
		want []string
	}{
		{"complete embedded object passes",
			`{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}},"spec":{}}}}`, nil},
		{"apiVersion and kind are required, metadata is not",
			`{"spec":{"template":{"spec":{}}}}`,
			[]string{`spec.template.apiVersion: Required value`, `spec.template.kind: Required value`}},
		{"apiVersion must parse",
			`{"spec":{"template":{"apiVersion":"a/b/c","kind":"Pod"}}}`,
			[]string{`spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`}},
		{"kind must be a string",
			`{"spec":{"template":{"apiVersion":"v1","kind":5}}}`,
			[]string{`spec.template.kind: Invalid value: 5: must be a string`}},
		{"kind may have mixed case but must be a DNS-1035 label otherwise",
			`{"spec":{"template":{"apiVersion":"v1","kind":"My_Kind"}}}`,
			[]string{`spec.template.kind: Invalid value: "My_Kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-'`}},
		{"embedded metadata validated as ObjectMeta",
			`{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"bad key!":"x"}}}}}`,
			[]string{`spec.template.metadata.labels: Invalid value: "bad key!": name part must consist of alphanumeric characters`}},
		{"embedded metadata of the wrong type",
			`{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":5}}}}`,
			[]string{`spec.template.metadata: Invalid value: {"name":5}: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`}},
		{"name may be a path segment but not '..'",
			`{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":".."}}}}`,
			[]string{`spec.template.metadata.name: Invalid value: "..": may not be '..'`}},
	}
	s := mustSchema(t, embeddedSchema)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectErrors(t, Validate(s, mustObj(t, tt.obj), nil), tt.want)
		})
	}
}

func TestPrune_EmbeddedMetadata_PrunedToObjectMetaAndReported(t *testing.T) {
	s := mustSchema(t, `
type: object
properties:
  spec:
    type: object
    properties:
      foo: {type: string}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
`)
	// the FieldValidation "unknown metadata" conformance object
	obj := mustMap(t, `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"mytest","unknownMeta":"unknown"},
		"spec":{"template":{"apiversion":"foo/v1","kind":"Sub","metadata":{"unknownSubMeta":"unknown","name":"subobject","namespace":"ns"}},"foo":"foo1"}}`)
	unknown := Prune(s, obj, true)
	if len(unknown) != 1 || unknown[0] != "spec.template.metadata.unknownSubMeta" {
		t.Errorf("unknown = %q, want [spec.template.metadata.unknownSubMeta]", unknown)
	}
	// root metadata is the API server's: untouched
	expectJSON(t, obj, `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"mytest","unknownMeta":"unknown"},
		"spec":{"template":{"apiversion":"foo/v1","kind":"Sub","metadata":{"name":"subobject","namespace":"ns"}},"foo":"foo1"}}`)
}

func TestPrune_EmbeddedMetadataUndecodable_LeftForValidate(t *testing.T) {
	s := mustSchema(t, embeddedSchema)
	obj := mustMap(t, `{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":5,"x":1}}}}`)
	if unknown := Prune(s, obj, true); len(unknown) != 0 {
		t.Errorf("unknown = %q, want none", unknown)
	}
	expectJSON(t, obj, `{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":5,"x":1}}}}`)
	expectContains(t, Validate(s, obj, nil), `spec.template.metadata: Invalid value`)
}

func TestUnknownObjectMetaFields_RootMetadata(t *testing.T) {
	tests := []struct {
		name    string
		obj     string
		want    []string
		wantErr bool
	}{
		{"known fields only", `{"metadata":{"name":"a","labels":{"x":"y"}}}`, nil, false},
		{"unknown field, the FieldValidation conformance case", `{"metadata":{"name":"mytest","unknownMeta":"unknown"}}`, []string{"metadata.unknownMeta"}, false},
		{"no metadata", `{"spec":{}}`, nil, false},
		{"undecodable", `{"metadata":{"name":5}}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UnknownObjectMetaFields(mustMap(t, tt.obj))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
