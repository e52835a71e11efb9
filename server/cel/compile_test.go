package cel

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func compileErrors(t *testing.T, schema string) field.ErrorList {
	t.Helper()
	_, errs := CompileSchema(mustSchema(t, schema), field.NewPath("spec", "validation", "openAPIV3Schema"))
	return errs
}

// specWith is a root schema whose spec (with integer x and a list of
// strings) carries rules.
func specWith(rules string) string {
	return `{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-validations":` + rules +
		`,"properties":{"x":{"type":"integer"},"names":{"type":"array","maxItems":10,"items":{"type":"string","maxLength":64}},"namespace":{"type":"string"},"a-b":{"type":"string"}}}}}`
}

func TestCompileSchema_BadRules_FieldErrorsAsUpstream(t *testing.T) {
	const rule0 = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]"
	cases := []struct {
		name, schema string
		want         []string
	}{
		{"syntax error", specWith(`[{"rule":"self = 42"}]`),
			[]string{rule0 + `.rule: Invalid value: {"rule":"self = 42"}: compilation failed: ERROR: <input>:1:6: Syntax error`}},
		{"undefined field", specWith(`[{"rule":"self.z == 100"}]`),
			[]string{rule0 + ".rule: Invalid value", "compilation failed: ERROR: <input>:1:5: undefined field 'z'"}[:1]},
		{"not a bool", specWith(`[{"rule":"self.x"}]`), []string{rule0 + ".rule", "cel expression must evaluate to a bool"}[1:]},
		{"message expression not a string", specWith(`[{"rule":"self.x > 0","messageExpression":"self.x"}]`),
			[]string{rule0 + `.messageExpression: Invalid value: {"rule":"self.x \u003e 0","messageExpression":"self.x"}: messageExpression must evaluate to a string`}},
		{"message expression syntax", specWith(`[{"rule":"self.x > 0","messageExpression":"'a' +"}]`),
			[]string{"messageExpression compilation failed"}},
		{"empty rule", specWith(`[{"rule":"  "}]`), []string{rule0 + ".rule: Required value: rule is not specified"}},
		{"multi-line rule without message", specWith(`[{"rule":"self.x >\n 0"}]`),
			[]string{rule0 + ".message: Required value: message must be specified if rule contains line breaks"}},
		{"unknown reason", specWith(`[{"rule":"self.x > 0","reason":"FieldValueNope"}]`),
			[]string{rule0 + `.reason: Unsupported value: "FieldValueNope"`}},
		{"field path not in schema", specWith(`[{"rule":"self.x > 0","fieldPath":".nope"}]`),
			[]string{rule0 + `.fieldPath: Invalid value: ".nope": must be a valid path`}},
		{"optionalOldSelf without oldSelf", specWith(`[{"rule":"self.x > 0","optionalOldSelf":true}]`),
			[]string{rule0 + ".optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"}},
		{"oldSelf under an atomic list", `{"type":"object","properties":{"l":{"type":"array","maxItems":5,"items":{"type":"string","maxLength":5,"x-kubernetes-validations":[{"rule":"self == oldSelf"}]}}}}`,
			[]string{"spec.validation.openAPIV3Schema.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[l]"}},
		{"rule on an untyped field", `{"type":"object","properties":{"u":{"x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-validations":[{"rule":"true"}]}}}`,
			[]string{"spec.validation.openAPIV3Schema.properties[u].x-kubernetes-validations: Internal error: internal error: failed to construct type information"}},
		{"metadata beyond name and generateName", `{"type":"object","x-kubernetes-validations":[{"rule":"self.metadata.labels.size() > 0"}]}`,
			[]string{"undefined field 'labels'"}},
		{"unknown fields of preserved objects", `{"type":"object","properties":{"o":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-validations":[{"rule":"self.foo == 1"}]}}}`,
			[]string{"undefined field 'foo'"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errorsContain(t, compileErrors(t, tc.schema), tc.want...)
		})
	}
}

func TestCompileSchema_EstimatedCost_OverLimitsForbidden(t *testing.T) {
	// The conformance test's schema: a rule on unbounded nested lists.
	expensive := `{"type":"object","properties":{"spec":{"type":"object","properties":{"x":{"type":"array","items":{"type":"array","items":{"type":"string"},"x-kubernetes-validations":[{"rule":"self.all(s, s == 'string constant')"}]}}}}}}`
	const at = "spec.validation.openAPIV3Schema.properties[spec].properties[x].items.x-kubernetes-validations[0].rule"
	errorsContain(t, compileErrors(t, expensive),
		at+": Forbidden: estimated rule cost exceeds budget by factor of more than 100x",
		at+": Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
		"spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget")

	// Bounding the lists brings the same rule under the limit.
	bounded := `{"type":"object","properties":{"spec":{"type":"object","properties":{"x":{"type":"array","maxItems":10,"items":{"type":"array","maxItems":10,"items":{"type":"string","maxLength":10},"x-kubernetes-validations":[{"rule":"self.all(s, s == 'string constant')"}]}}}}}}`
	errorsContain(t, compileErrors(t, bounded))

	// Each rule under the per-rule limit, together over the schema's.
	rule := `{"rule":"self.l.all(x, self.l.all(y, x == y))"}`
	many := `{"type":"object","properties":{"l":{"type":"array","maxItems":1400,"items":{"type":"integer"}}},"x-kubernetes-validations":[` +
		rule + "," + rule + "," + rule + "," + rule + "," + rule + "," + rule + "," + rule + "," + rule + "," + rule + "," + rule + "," + rule + "]}"
	errs := compileErrors(t, many)
	if len(errs) != 5 || errs[4].Error() == "" || errs[4].Field != "spec.validation.openAPIV3Schema" {
		t.Fatalf("want the 4 most expensive rules and the schema named, got %v", errs.ToAggregate())
	}
}

func TestCompileSchema_ConformanceSchema_Compiles(t *testing.T) {
	s := `{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-validations":[{"rule":"self.x + self.y > 0"},
	{"rule":"self.firstArray.isSorted() && self.secondArray.isSorted() && ((self.firstArray.sum() + self.secondArray.sum()) % 2 == 0)"},
	{"rule":"self.largeArray.all(x, self.largeArray.all(y, y == x))"}],
	"properties":{"x":{"type":"integer"},"y":{"type":"integer"},"firstArray":{"type":"array","maxItems":1000,"items":{"type":"integer"}},
	"secondArray":{"type":"array","maxItems":1000,"items":{"type":"integer"}},"largeArray":{"type":"array","maxItems":725,"items":{"type":"integer"}}}},
	"status":{"type":"object","x-kubernetes-validations":[{"rule":"self.health == 'ok' || self.health == 'unhealthy'"}],"properties":{"health":{"type":"string"}}}}}`
	v, errs := CompileSchema(mustSchema(t, s), field.NewPath("openAPIV3Schema"))
	errorsContain(t, errs)
	if v == nil || len(v.properties["spec"].compiled) != 3 || v.properties["status"] == nil {
		t.Fatalf("validator does not hold the rules: %+v", v)
	}
}

func TestCompileSchema_NoRules_NilValidator(t *testing.T) {
	v, errs := CompileSchema(mustSchema(t, `{"type":"object","properties":{"spec":{"type":"object"}}}`), nil)
	if v != nil || len(errs) != 0 {
		t.Fatalf("got %v, %v; want nil, nil", v, errs)
	}
	// A nil validator validates nothing.
	if errs := v.Validate(t.Context(), nil, map[string]any{}, nil); len(errs) != 0 {
		t.Fatalf("nil validator returned %v", errs)
	}
}

func TestCompileSchema_EscapedAndReservedNames_Accessible(t *testing.T) {
	errorsContain(t, compileErrors(t, specWith(`[{"rule":"self.__namespace__ == self.namespace && self.a__dash__b != ''"}]`)))
}
