package cel

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

func evalExpr(t *testing.T, expr string) (any, error) {
	t.Helper()
	env, err := NewEnv(nil)
	if err != nil {
		t.Fatalf("env: %v", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compile %q: %v", expr, iss.Err())
	}
	prog, err := env.Program(ast)
	if err != nil {
		t.Fatalf("program %q: %v", expr, err)
	}
	out, _, err := prog.Eval(cel.NoVars())
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Every library family of the base environment, each expression true.
func TestBaseLibraries_Functions_EvaluateAsUpstream(t *testing.T) {
	families := map[string][]string{
		"k8s lists": {
			"[1, 2, 3].isSorted()", "!['b', 'a'].isSorted()", "[1, 2, 3].sum() == 6", "[1.5, 2.0].sum() == 3.5",
			"[duration('1s'), duration('2s')].sum() == duration('3s')", "[3, 1, 2].min() == 1", "[3, 1, 2].max() == 3",
			"['b', 'c', 'a'].max() == 'c'", "[1, 2, 1].indexOf(1) == 0", "[1, 2, 1].lastIndexOf(1) == 2", "[1].indexOf(5) == -1",
			"[0u, 2u].sum() == 2u",
		},
		"regex": {
			"'abc 123'.find('[0-9]+') == '123'", "'abc'.find('[0-9]+') == ''",
			"'a1b22c333'.findAll('[0-9]+') == ['1', '22', '333']", "'a1b22c333'.findAll('[0-9]+', 2) == ['1', '22']",
			"'x'.find('x'.upperAscii() + '|x') == 'x'",
		},
		"urls": {
			"url('https://example.com:8443/a%20b?x=1&x=2').getScheme() == 'https'",
			"url('https://example.com:8443/path').getHost() == 'example.com:8443'",
			"url('https://[::1]:80/').getHostname() == '::1'", "url('https://example.com:8443/').getPort() == '8443'",
			"url('https://example.com/a%20b').getEscapedPath() == '/a%20b'",
			"url('https://example.com/?x=1&x=2').getQuery() == {'x': ['1', '2']}",
			"isURL('https://example.com')", "!isURL('not a url')", "url('/relative') == url('/relative')",
		},
		"quantity": {
			"quantity('1Gi').isGreaterThan(quantity('1G'))", "quantity('100m').isLessThan(quantity('1'))",
			"quantity('1k').compareTo(quantity('1000')) == 0", "quantity('1.5').asApproximateFloat() == 1.5",
			"quantity('2k').asInteger() == 2000", "!quantity('1.5').isInteger()", "sign(quantity('-1')) == -1",
			"quantity('1').add(1) == quantity('2')", "quantity('1').sub(quantity('500m')) == quantity('500m')",
			"isQuantity('10Mi')", "!isQuantity('10 Mi')",
		},
		"ip": {
			"ip('192.168.0.1').family() == 4", "ip('::1').family() == 6", "ip('::1').isLoopback()",
			"ip('0.0.0.0').isUnspecified()", "ip('fe80::1').isLinkLocalUnicast()", "ip('ff02::1').isLinkLocalMulticast()",
			"ip('8.8.8.8').isGlobalUnicast()", "isIP('10.0.0.1')", "!isIP('10.0.0.1%eth0')", "!isIP('::ffff:1.2.3.4')",
			"ip.isCanonical('2001:db8::1')", "!ip.isCanonical('2001:DB8::1')", "string(ip('10.0.0.1')) == '10.0.0.1'",
			"ip('10.0.0.1') == ip('10.0.0.1')",
		},
		"cidr": {
			"cidr('10.0.0.0/8').containsIP('10.1.2.3')", "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
			"!cidr('10.0.0.0/8').containsIP('11.0.0.1')", "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')",
			"!cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8'))", "cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
			"cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')", "cidr('10.0.0.0/8').prefixLength() == 8",
			"isCIDR('::/0')", "!isCIDR('10.0.0.0')", "string(cidr('10.0.0.0/8')) == '10.0.0.0/8'",
		},
		"format": {
			"!format.dns1123Label().validate('my-name').hasValue()", "format.dns1123Label().validate('My_Name').hasValue()",
			"format.named('dns1123Subdomain').hasValue()", "!format.named('nonsense').hasValue()",
			"format.named('uuid').value().validate('not-a-uuid').value()[0] == 'does not match the UUID format'",
			"!format.labelValue().validate('v1.2').hasValue()", "!format.uri().validate('https://x').hasValue()",
			"!format.byte().validate('QUI=').hasValue()", "!format.date().validate('2024-01-31').hasValue()",
			"!format.qualifiedName().validate('example.com/name').hasValue()",
		},
		"semver": {
			"semver('1.2.3').major() == 1", "semver('1.2.3').minor() == 2", "semver('1.2.3').patch() == 3",
			"semver('1.2.3').isLessThan(semver('1.10.0'))", "semver('2.0.0').isGreaterThan(semver('1.9.9'))",
			"semver('1.0.0').compareTo(semver('1.0.0')) == 0", "isSemver('1.0.0-alpha')", "!isSemver('v1.0')",
			"isSemver('v1.0', true)", "semver('v01.2', true) == semver('1.2.0')",
		},
		"ext strings": {
			"'abc'.charAt(1) == 'b'", "'a,b'.split(',') == ['a', 'b']", "['a', 'b'].join('-') == 'a-b'",
			"'  x '.trim() == 'x'", "'abc'.indexOf('c') == 2", "strings.quote('a\"b') == '\"a\\\\\"b\"'",
			"'%s=%d'.format(['x', 1]) == 'x=1'", "'hello'.lastIndexOf('l') == 3",
		},
		"ext sets": {
			"sets.contains([1, 2, 3], [1, 3])", "sets.equivalent([1, 2], [2, 1, 1])", "sets.intersects([1], [1, 5])",
		},
		"ext lists": {
			"lists.range(3) == [0, 1, 2]", "[[1], [2, 3]].flatten() == [1, 2, 3]", "[3, 1].sort() == [1, 3]",
			"[1, 1, 2].distinct() == [1, 2]", "[1, 2, 3].slice(1, 2) == [2]", "[1, 2].reverse() == [2, 1]",
			"[1, 2].first() == optional.of(1)", "[1, 2].last().value() == 2",
		},
		"comprehensions": {
			"[10, 20].all(i, v, v == (i + 1) * 10)", "{'a': 1}.exists(k, v, k == 'a' && v == 1)",
			"[1, 2].transformList(i, v, v * 2) == [2, 4]", "{'a': 1}.transformMap(k, v, v + 1) == {'a': 2}",
			"[1, 2, 3].filter(x, x > 1).map(x, x * 10) == [20, 30]", "[1, 2].exists_one(x, x == 2)",
		},
		"optionals and numbers": {
			"optional.of(1).orValue(2) == 1", "optional.none().orValue(2) == 2", "{'a': 1}[?'b'].hasValue() == false",
			"1 < 1.5", "2u > 1", "int('5') == 5", "duration('1h').getMinutes() == 60",
			"timestamp('2024-01-01T00:00:00Z').getFullYear() == 2024",
		},
	}
	for family, exprs := range families {
		for _, expr := range exprs {
			t.Run(family+"/"+expr, func(t *testing.T) {
				out, err := evalExpr(t, expr)
				if err != nil {
					t.Fatalf("eval: %v", err)
				}
				if out != types.True {
					t.Errorf("%s = %v, want true", expr, out)
				}
			})
		}
	}
}

func TestBaseLibraries_BadArguments_FailAtRuntime(t *testing.T) {
	cases := map[string]string{
		"[].min() == 0":                          "min called on empty list",
		"[0].max() == 0 && [].max() == 1":        "max called on empty list",
		"'x'.find(['['][0]) == ''":               "Illegal regex",
		"url('not a url') == url('x')":           "URL parse error",
		"quantity('1.5x') == quantity('1')":      "quantities must match the regular expression",
		"quantity('1.5').asInteger() == 1":       "cannot convert value to integer",
		"ip('1.2.3') == ip('1.2.3.4')":           "parse error during conversion from string",
		"ip('::ffff:1.2.3.4').family() == 6":     "IPv4-mapped IPv6 address",
		"cidr('10.0.0.0') == cidr('10.0.0.0/8')": "network address parse error",
		"semver('v1') == semver('1.0.0')":        "No Major.Minor.Patch elements found",
	}
	for expr, want := range cases {
		t.Run(expr, func(t *testing.T) {
			_, err := evalExpr(t, expr)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want it to contain %q", err, want)
			}
		})
	}
}

func TestEscape_PropertyNames_AsUpstream(t *testing.T) {
	cases := []struct {
		name, escaped string
		ok            bool
	}{
		{"plain", "plain", true},
		{"namespace", "__namespace__", true},
		{"a.b", "a__dot__b", true},
		{"a-b", "a__dash__b", true},
		{"a/b", "a__slash__b", true},
		{"a__b", "a__underscores__b", true},
		{"_x", "_x", true},
		{"1a", "", false},
		{"", "", false},
		{"a$b", "", false},
		{"a b", "", false},
	}
	for _, tc := range cases {
		got, ok := Escape(tc.name)
		if got != tc.escaped || ok != tc.ok {
			t.Errorf("Escape(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.escaped, tc.ok)
		}
		if tc.ok {
			if back, ok := Unescape(got); !ok || back != tc.name {
				t.Errorf("Unescape(%q) = %q, %v; want %q", got, back, ok, tc.name)
			}
		}
	}
}
