package cel

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// vals builds a root object schema with properties val1..valN.
func vals(props ...string) string {
	parts := make([]string, len(props))
	for i, p := range props {
		parts[i] = fmt.Sprintf(`"val%d":%s`, i+1, p)
	}
	return `{"type":"object","properties":{` + strings.Join(parts, ",") + `}}`
}

const (
	intS       = `{"type":"integer"}`
	strS       = `{"type":"string"}`
	byteS      = `{"type":"string","format":"byte"}`
	durationS  = `{"type":"string","format":"duration"}`
	dateTimeS  = `{"type":"string","format":"date-time"}`
	intListS   = `{"type":"array","items":{"type":"integer"}}`
	strSetS    = `{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}}`
	intSetS    = `{"type":"array","x-kubernetes-list-type":"set","items":{"type":"integer"}}`
	strMapS    = `{"type":"object","additionalProperties":{"type":"string"}}`
	intOrStrS  = `{"x-kubernetes-int-or-string":true}`
	listMapKVS = `{"type":"object","properties":{"objs":{"type":"array","items":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"],"items":{"type":"object","properties":{"k":{"type":"string"},"v":{"type":"string"}}}}}}}`
)

func withRootRule(t *testing.T, schema, rule string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := mustSchema(t, schema)
	s.XValidations = apiextensionsv1.ValidationRules{{Rule: rule}}
	return s
}

func bigIntList(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// The expected costs are upstream's (apiextensions-apiserver's cost
// stability tests): rules must cost what they cost on a real cluster, or
// rules that pass there would be rejected here and the other way round.
func TestValidate_RuntimeCost_MatchesUpstream(t *testing.T) {
	cases := []struct {
		name, schema, obj string
		costs             map[string]int64
	}{
		{"strings", vals(strS, strS), `{"val1":"Rook takes 👑","val2":"Rook takes 👑"}`, map[string]int64{
			"self.val1 == 'Rook takes 👑' && 'Rook takes 👑' == self.val1 && self.val1 == self.val2": 14,
			"self.val1.startsWith('Rook')":                     3,
			"self.val1.matches('^[^0-9]*$')":                   8,
			"self.val1.charAt(3) == 'k'":                       4,
			"self.val1.indexOf('o', 2) == 2":                   4,
			"self.val1.replace(' ', 'x') == 'Rookxtakesx👑'":    7,
			"self.val1.split(' ', 2) == ['Rook', 'takes 👑']":   6,
			"self.val1.substring(4, 10).trim() == 'takes'":     6,
			"self.val1.upperAscii() == 'ROOK TAKES 👑'":         6,
			"self.val1.lowerAscii() == self.val1.lowerAscii()": 10,
			"'%d %s %f %s %s'.format([1, 'abc', 1.0, duration('1m'), timestamp('2000-01-01T00:00:00.000Z')]) == '1 abc 1.000000 60s 2000-01-01T00:00:00Z'": 6,
		}},
		{"formats", vals(byteS, durationS, dateTimeS), `{"val1":"QUI=","val2":"1h2m3s4ms","val3":"2011-08-18T19:03:37.010000000+01:00"}`, map[string]int64{
			"self.val1 == b'AB'":                                3,
			"size(self.val1) == 2":                              4,
			"self.val2 == duration('1h2m') + duration('3s4ms')": 4,
			"self.val3.getDate('01:00') == 18":                  4,
			"type(self.val3) == google.protobuf.Timestamp":      4,
		}},
		{"lists", vals(intListS, intListS), `{"val1":[1,2,3],"val2":[1,2,3]}`, map[string]int64{
			"self.val1 == [1, 2, 3] && [1, 2, 3] == self.val1 && self.val1 == self.val2": 11,
			"1 in self.val1": 5,
			"self.val1 + self.val2 == [1, 2, 3, 1, 2, 3]": 6,
			"has(self.val1) && has(self.val2)":            2,
		}},
		{"list sets", vals(strSetS, strSetS, intSetS), `{"val1":["a","b","c"],"val2":["a","c","b"],"val3":` + bigIntList(1000) + `}`, map[string]int64{
			"self.val1 == ['c', 'b', 'a']":                   3,
			"self.val1 == self.val2":                         5,
			"self.val1 + ['c', 'd'] == ['a', 'b', 'c', 'd']": 4,
			"sets.contains(self.val1, ['a'])":                6,
			"sets.equivalent(self.val1, ['a', 'b', 'c'])":    21,
			"sets.contains(self.val3, [1])":                  1003,
			"!sets.equivalent(self.val3, [1, 2, 3])":         6004,
		}},
		{"list maps", listMapKVS, `{"objs":[[{"k":"a","v":"1"},{"k":"b","v":"2"}],[{"k":"b","v":"2"},{"k":"a","v":"1"}],[{"k":"b","v":"3"},{"k":"a","v":"1"}],[{"k":"c","v":"4"}]]}`, map[string]int64{
			"self.objs[0] == self.objs[1]":                                      7,
			"self.objs[0] + self.objs[2] == self.objs[2]":                       11,
			"self.objs[0] == [self.objs[0][1], self.objs[0][0]]":                22,
			"self.objs[2] + [self.objs[0][0], self.objs[0][1]] == self.objs[0]": 26,
			"size(self.objs[0] + [self.objs[3][0]]) == 3":                       20,
		}},
		{"maps", vals(strMapS, strMapS), `{"val1":{"k1":"a","k2":"b"},"val2":{"k2":"b","k1":"a"}}`, map[string]int64{
			"self.val1 == self.val2":              5,
			"'k1' in self.val1":                   3,
			"self.val1 == {'k1': 'a', 'k2': 'b'}": 3,
		}},
		{"int or string", `{"type":"object","properties":{"something":` + intOrStrS + `}}`, `{"something":"25%"}`, map[string]int64{
			"type(self.something) == int ? self.something == 1 : self.something == '25%'": 7,
			"self.something != 1":                            3,
			"self.something == 1 || self.something == '25%'": 6,
			"self.something != ['anything']":                 3,
		}},
		{"optionals", `{"type":"object","properties":{"obj":{"type":"object","properties":{"field":{"type":"string"},"absentField":{"type":"string"}}},"m":` + strMapS + `,"l":{"type":"array","items":{"type":"string"}}}}`,
			`{"obj":{"field":"a"},"m":{"k":"v"},"l":["a"]}`, map[string]int64{
				"optional.none().or(optional.of('a')).hasValue()": 3,
				"self.obj.?field == optional.of('a')":             5,
				"self.obj.?absentField == optional.none()":        4,
				"self.m[?'k'] == optional.of('v')":                5,
				"self.l[?0] == optional.of('a')":                  5,
			}},
		{"quantity", vals(strS, strS), `{"val1":"20","val2":"200M"}`, map[string]int64{
			`isQuantity(self.val1)`: 3,
			`quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")`: 6,
			`quantity(self.val1).isLessThan(quantity(self.val2))`:                          7,
			`quantity("50k").add(quantity("20")) == quantity("50.02k")`:                    5,
			`quantity("50k").sub(20) == quantity("49980")`:                                 4,
			`quantity(self.val1).isInteger()`:                                              4,
		}},
		{"ext lists", vals(intListS), `{"val1":[1,2,3]}`, map[string]int64{
			`lists.range(4) == [0,1,2,3]`:                                  16,
			`[4, 3, 2, 1].sort() == [1, 2, 3, 4]`:                          44,
			`[-3, 1, -5, -2, 4].sortBy(e, -(e * e)) == [-5, 4, -3, -2, 1]`: 145,
			`[-2, 5, -2, 1, 1, 5, -2, 1].distinct() == [-2, 5, 1]`:         140,
			`[1,2,3,4].slice(1, 3) == [2, 3]`:                              14,
		}},
	}
	for _, tc := range cases {
		for rule, want := range tc.costs {
			t.Run(tc.name+"/"+rule, func(t *testing.T) {
				v := compileUnchecked(t, withRootRule(t, tc.schema, rule))
				errs, remaining := v.validate(context.Background(), field.NewPath("root"), mustObject(t, tc.obj), nil, ratchet{}, RuntimeCELCostBudget)
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs.ToAggregate())
				}
				if got := RuntimeCELCostBudget - remaining; got != want {
					t.Errorf("runtime cost = %d, want %d", got, want)
				}
			})
		}
	}
}

func TestCompileSchema_EstimatedCost_MatchesUpstream(t *testing.T) {
	cases := []struct {
		name, schema string
		costs        map[string]uint64
	}{
		{"strings", vals(strS, strS), map[string]uint64{
			"self.val1 == 'Rook takes 👑' && 'Rook takes 👑' == self.val1 && self.val1 == self.val2": 314585,
			"self.val1.matches('^[^0-9]*$')":                   943721,
			"self.val1.indexOf('o', 2) == 2":                   314576,
			"self.val1.replace(' ', 'x') == 'Rookxtakesx👑'":    629150,
			"self.val1.split(' ') == ['Rook', 'takes', '👑']":   629159,
			"self.val1.substring(4, 10).trim() == 'takes'":     629149,
			"self.val1.lowerAscii() == self.val1.lowerAscii()": 943723,
		}},
		{"lists", vals(intListS, intListS), map[string]uint64{
			"self.val1 == [1, 2, 3] && [1, 2, 3] == self.val1 && self.val1 == self.val2": 157317,
			"1 in self.val1":                                      1572865,
			"self.val1.all(k, size(self.val1) > 0)":               11010044,
			"size(self.val1.filter(k, size(self.val1) > 1)) == 1": 26738686,
		}},
		{"list sets", vals(strSetS, strSetS), map[string]uint64{
			"self.val1 == self.val2":                      104862,
			"'a' in self.val1":                            1048577,
			"self.val1.exists_one(k, self.val1 == ['a'])": 15728629,
		}},
		{"quantity", vals(strS, strS), map[string]uint64{
			`isQuantity(self.val1)`:                               314575,
			`quantity(self.val1).isLessThan(quantity(self.val2))`: 629151,
			`quantity(self.val1).isInteger()`:                     314576,
			`quantity("50k").sub(20) == quantity("49980")`:        4,
		}},
	}
	for _, tc := range cases {
		for rule, want := range tc.costs {
			t.Run(tc.name+"/"+rule, func(t *testing.T) {
				v := compileUnchecked(t, withRootRule(t, tc.schema, rule))
				if got := v.compiled[0].maxCost; got != want {
					t.Errorf("estimated cost = %d, want %d", got, want)
				}
			})
		}
	}
}
