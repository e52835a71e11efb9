package cel

import (
	"fmt"
	"strings"
	"testing"
)

func spec(props, rules string) string {
	return `{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-validations":` + rules + `,"properties":` + props + `}}}`
}

const numProps = `{"num":{"type":"integer"},"name":{"type":"string","maxLength":20}}`

func TestValidate_FailingRule_ReportsAsUpstream(t *testing.T) {
	cases := []struct {
		name, schema, obj string
		want              []string
	}{
		{"passes", spec(numProps, `[{"rule":"self.num > 0"}]`), `{"spec":{"num":1}}`, nil},
		{"default message", spec(numProps, `[{"rule":"self.num > 0"}]`), `{"spec":{"num":0}}`,
			[]string{"spec: Invalid value: failed rule: self.num > 0"}},
		{"message", spec(numProps, `[{"rule":"self.num > 0","message":" must be positive "}]`), `{"spec":{"num":0}}`,
			[]string{"spec: Invalid value: must be positive"}},
		{"message expression", spec(numProps, `[{"rule":"self.num > 0","message":"m","messageExpression":"'bad num for ' + self.name"}]`), `{"spec":{"num":-3,"name":"x"}}`,
			[]string{"spec: Invalid value: bad num for x"}},
		{"message expression failing falls back to message", spec(numProps, `[{"rule":"self.num > 0","message":"fallback","messageExpression":"self.name"}]`), `{"spec":{"num":0}}`,
			[]string{"spec: Invalid value: fallback"}},
		{"message expression empty falls back", spec(numProps, `[{"rule":"self.num > 0","messageExpression":"' '"}]`), `{"spec":{"num":0}}`,
			[]string{"spec: Invalid value: failed rule: self.num > 0"}},
		{"reason forbidden", spec(numProps, `[{"rule":"self.num > 0","message":"no","reason":"FieldValueForbidden"}]`), `{"spec":{"num":0}}`,
			[]string{"spec: Forbidden: no"}},
		{"reason required", spec(numProps, `[{"rule":"has(self.name)","message":"name please","reason":"FieldValueRequired"}]`), `{"spec":{"num":0}}`,
			[]string{"spec: Required value: name please"}},
		{"reason duplicate", spec(numProps, `[{"rule":"false","reason":"FieldValueDuplicate"}]`), `{"spec":{"num":0}}`,
			[]string{"spec: Duplicate value"}},
		{"field path", spec(numProps, `[{"rule":"self.num > 0","fieldPath":".num"}]`), `{"spec":{"num":0}}`,
			[]string{"spec.num: Invalid value: failed rule"}},
		{"scalar value printed", `{"type":"object","properties":{"spec":{"type":"object","properties":{"num":{"type":"integer","x-kubernetes-validations":[{"rule":"self > 5"}]}}}}}`, `{"spec":{"num":3}}`,
			[]string{"spec.num: Invalid value: 3: failed rule: self > 5"}},
		{"nested list item path", `{"type":"object","properties":{"spec":{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string","x-kubernetes-validations":[{"rule":"self != 'bad'"}]}}}}}}}}`,
			`{"spec":{"items":[{"name":"ok"},{"name":"bad"}]}}`, []string{`spec.items[1].name: Invalid value: "bad": failed rule`}},
		{"map value path", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string","x-kubernetes-validations":[{"rule":"self.size() < 3"}]}}}}`,
			`{"m":{"a":"x","b":"long"}}`, []string{`m[b]: Invalid value: "long"`}},
		{"runtime error", spec(numProps, `[{"rule":"self.name == 'x'"}]`), `{"spec":{"num":1}}`,
			[]string{`spec: Invalid value: "object": no such key: name evaluating rule: self.name == 'x'`}},
		{"null value not validated", `{"type":"object","properties":{"n":{"type":"string","nullable":true,"x-kubernetes-validations":[{"rule":"self == 'x'"}]}}}`, `{"n":null}`, nil},
		{"root rule sees kind and name", `{"type":"object","x-kubernetes-validations":[{"rule":"self.kind == 'Widget' && self.metadata.name.startsWith('w-')"}]}`,
			`{"apiVersion":"x/v1","kind":"Widget","metadata":{"name":"v-1","namespace":"ns"}}`, []string{"Invalid value: failed rule"}},
		{"embedded resource", `{"type":"object","properties":{"e":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-validations":[{"rule":"self.apiVersion == 'v1' && self.kind == 'Pod' && self.metadata.name == 'p'"}]}}}`,
			`{"e":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}}`, nil},
		{"int or string", `{"type":"object","properties":{"v":{"x-kubernetes-int-or-string":true,"x-kubernetes-validations":[{"rule":"self == 1 || self == '25%'"}]}}}`,
			`{"v":"50%"}`, []string{`v: Invalid value: "50%": failed rule`}},
		{"set list equality ignores order", `{"type":"object","properties":{"a":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},"b":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}}},"x-kubernetes-validations":[{"rule":"self.a == self.b"}]}`,
			`{"a":["x","y"],"b":["y","x"]}`, nil},
		{"escaped field names", `{"type":"object","properties":{"a-b":{"type":"integer"},"namespace":{"type":"integer"}},"x-kubernetes-validations":[{"rule":"self.a__dash__b == self.__namespace__ && self.namespace == 1"}]}`,
			`{"a-b":1,"namespace":1}`, nil},
		{"allOf rules", `{"type":"object","properties":{"n":{"type":"integer"}},"allOf":[{"x-kubernetes-validations":[{"rule":"self.n < 10"}]}]}`,
			`{"n":11}`, []string{"Invalid value: failed rule: self.n < 10"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errorsContain(t, validate(t, tc.schema, tc.obj, ""), tc.want...)
		})
	}
}

func TestValidate_TransitionRules_OnlyWithOldValue(t *testing.T) {
	numRule := `{"type":"object","properties":{"spec":{"type":"object","properties":{"num":{"type":"integer","x-kubernetes-validations":[{"rule":"self > oldSelf"}]}}}}}`
	listMap := `{"type":"object","properties":{"l":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"],"items":{"type":"object","properties":{"k":{"type":"string"},"v":{"type":"integer"}},"x-kubernetes-validations":[{"rule":"self.v >= oldSelf.v","message":"v may not shrink"}]}}}}`
	mapRule := `{"type":"object","properties":{"m":{"type":"object","maxProperties":10,"additionalProperties":{"type":"string","maxLength":10,"x-kubernetes-validations":[{"rule":"self == oldSelf","message":"immutable"}]}}}}`
	optional := `{"type":"object","properties":{"s":{"type":"string","x-kubernetes-validations":[{"rule":"oldSelf.hasValue() ? self == oldSelf.value() : self == 'initial'","optionalOldSelf":true,"message":"bad"}]}}}`
	cases := []struct {
		name, schema, obj, old string
		want                   []string
	}{
		{"create skips transition rule", numRule, `{"spec":{"num":1}}`, "", nil},
		{"update enforces it", numRule, `{"spec":{"num":1}}`, `{"spec":{"num":2}}`, []string{"spec.num: Invalid value: 1: failed rule: self > oldSelf"}},
		{"update satisfying it", numRule, `{"spec":{"num":3}}`, `{"spec":{"num":2}}`, nil},
		{"field new on update is skipped", numRule, `{"spec":{"num":1}}`, `{"spec":{}}`, nil},
		{"list map items correlate by key", listMap, `{"l":[{"k":"b","v":1},{"k":"a","v":5},{"k":"c","v":0}]}`, `{"l":[{"k":"a","v":4},{"k":"b","v":2}]}`,
			[]string{"l[0]: Invalid value: v may not shrink"}},
		{"map values correlate by key", mapRule, `{"m":{"a":"x","b":"changed","c":"new"}}`, `{"m":{"a":"x","b":"y"}}`,
			[]string{`m[b]: Invalid value: "changed": immutable`}},
		{"optional oldSelf on create", optional, `{"s":"other"}`, "", []string{`s: Invalid value: "other": bad`}},
		{"optional oldSelf on update", optional, `{"s":"other"}`, `{"s":"other"}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errorsContain(t, validate(t, tc.schema, tc.obj, tc.old), tc.want...)
		})
	}
}

func TestValidate_UnchangedInvalidValue_Ratcheted(t *testing.T) {
	s := `{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string","x-kubernetes-validations":[{"rule":"self.startsWith('ok')"}]},"b":{"type":"string"}}}}}`
	// The invalid a was stored before the rule existed; editing b leaves it.
	errorsContain(t, validate(t, s, `{"spec":{"a":"bad","b":"2"}}`, `{"spec":{"a":"bad","b":"1"}}`))
	// Changing a to another invalid value is rejected.
	errorsContain(t, validate(t, s, `{"spec":{"a":"worse","b":"1"}}`, `{"spec":{"a":"bad","b":"1"}}`), `spec.a: Invalid value: "worse"`)
	// A create is never ratcheted.
	errorsContain(t, validate(t, s, `{"spec":{"a":"bad"}}`, ""), "spec.a: Invalid value")
}

func TestValidate_RuntimeCost_ExceededStopsValidation(t *testing.T) {
	// The conformance test: 725*725 comparisons exceed the per-call limit.
	s := `{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-validations":[{"rule":"self.largeArray.all(x, self.largeArray.all(y, y == x))"},{"rule":"false"}],"properties":{"largeArray":{"type":"array","maxItems":725,"items":{"type":"integer"}}}}}}`
	arr := make([]string, 725)
	for i := range arr {
		arr[i] = "20"
	}
	obj := `{"spec":{"largeArray":[` + strings.Join(arr, ",") + `]}}`
	errorsContain(t, validate(t, s, obj, ""), "no further validation rules will be run due to call cost exceeds limit for rule: self.largeArray.all(x, self.largeArray.all(y, y == x))")

	// Many rules each under the per-call limit use up the whole budget:
	// each find() costs about 300k (string length times pattern length).
	var rules []string
	for i := 0; i < 40; i++ {
		rules = append(rules, fmt.Sprintf(`{"rule":"self.s.find('%s') == '' && %d >= 0"}`, strings.Repeat("x", 4000), i))
	}
	budget := `{"type":"object","properties":{"s":{"type":"string","maxLength":3000}},"x-kubernetes-validations":[` + strings.Join(rules, ",") + `]}`
	errs := validate(t, budget, `{"s":"`+strings.Repeat("a", 3000)+`"}`, "")
	errorsContain(t, errs, "validation failed due to running out of cost budget, no further validation rules will be run")
}
