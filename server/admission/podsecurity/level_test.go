package podsecurity

import (
	"testing"
)

func TestParseVersion_Forms_LatestOrV1Minor(t *testing.T) {
	cases := []struct {
		in      string
		want    Version
		wantErr bool
	}{
		{"latest", Latest(), false},
		{"v1.0", MajorMinor(1, 0), false},
		{"v1.25", MajorMinor(1, 25), false},
		{"v1.137", MajorMinor(1, 137), false},
		{"v1.01", Latest(), true},
		{"v2.0", Latest(), true},
		{"1.25", Latest(), true},
		{"v1.", Latest(), true},
		{"Latest", Latest(), true},
		{"", Latest(), true},
	}
	for _, tc := range cases {
		got, err := ParseVersion(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err != nil && err.Error() != `must be "latest" or "v1.x"` {
			t.Errorf("ParseVersion(%q) error %q", tc.in, err)
		}
	}
}

func TestParseLevel_Unknown_IsRestrictedWithError(t *testing.T) {
	for _, l := range []Level{LevelPrivileged, LevelBaseline, LevelRestricted} {
		if got, err := ParseLevel(string(l)); err != nil || got != l {
			t.Errorf("ParseLevel(%q) = %v, %v", l, got, err)
		}
	}
	got, err := ParseLevel("Restricted")
	if err == nil || got != LevelRestricted || err.Error() != "must be one of privileged, baseline, restricted" {
		t.Errorf("ParseLevel(Restricted) = %v, %v", got, err)
	}
}

func TestVersion_Older_LatestIsNewest(t *testing.T) {
	cases := []struct {
		a, b Version
		want bool
	}{
		{MajorMinor(1, 2), MajorMinor(1, 10), true},
		{MajorMinor(1, 10), MajorMinor(1, 2), false},
		{MajorMinor(1, 2), MajorMinor(1, 2), false},
		{MajorMinor(1, 99), Latest(), true},
		{Latest(), MajorMinor(1, 99), false},
		{Latest(), Latest(), false},
	}
	for _, tc := range cases {
		if got := tc.a.Older(tc.b); got != tc.want {
			t.Errorf("%v.Older(%v) = %v", tc.a, tc.b, got)
		}
	}
}

func labels(kv ...string) map[string]string {
	m := map[string]string{"other": "x"}
	for i := 0; i < len(kv); i += 2 {
		m[labelPrefix+kv[i]] = kv[i+1]
	}
	return m
}

// TestPolicyFromLabels_Labels_OverDefaults mirrors upstream's
// PolicyToEvaluate cases.
func TestPolicyFromLabels_Labels_OverDefaults(t *testing.T) {
	priv := LevelVersion{LevelPrivileged, Latest()}
	privileged := Policy{priv, priv, priv}
	b := func(v Version) LevelVersion { return LevelVersion{LevelBaseline, v} }
	r := func(v Version) LevelVersion { return LevelVersion{LevelRestricted, v} }
	cases := []struct {
		name     string
		labels   map[string]string
		defaults Policy
		want     Policy
		errs     []string
	}{
		{name: "no labels keep defaults", labels: nil, defaults: Policy{r(Latest()), b(Latest()), priv}, want: Policy{r(Latest()), b(Latest()), priv}},
		{name: "enforce also warns", labels: labels("enforce", "baseline"), want: Policy{Enforce: b(Latest()), Audit: priv, Warn: b(Latest())}},
		{name: "warn only", labels: labels("warn", "restricted"), want: Policy{Enforce: priv, Audit: priv, Warn: r(Latest())}},
		{name: "audit only", labels: labels("audit", "baseline"), want: Policy{Enforce: priv, Audit: b(Latest()), Warn: priv}},
		{name: "explicit warn wins", labels: labels("enforce", "baseline", "warn", "restricted"), want: Policy{Enforce: b(Latest()), Audit: priv, Warn: r(Latest())}},
		{name: "enforce version carries to warn", labels: labels("enforce", "baseline", "enforce-version", "v1.22"),
			want: Policy{Enforce: b(MajorMinor(1, 22)), Audit: priv, Warn: b(MajorMinor(1, 22))}},
		{name: "explicit warn version wins", labels: labels("enforce", "baseline", "enforce-version", "v1.22", "warn-version", "latest"),
			want: Policy{Enforce: b(MajorMinor(1, 22)), Audit: priv, Warn: b(Latest())}},
		{name: "warn version without enforce version", labels: labels("enforce", "baseline", "warn-version", "v1.23"),
			want: Policy{Enforce: b(Latest()), Audit: priv, Warn: b(MajorMinor(1, 23))}},
		{name: "fully specified", labels: labels("enforce", "baseline", "enforce-version", "v1.20", "warn", "restricted", "warn-version", "v1.21", "audit", "restricted", "audit-version", "v1.22"),
			want: Policy{Enforce: b(MajorMinor(1, 20)), Audit: r(MajorMinor(1, 22)), Warn: r(MajorMinor(1, 21))}},
		{name: "explicit privileged warn", labels: labels("enforce", "baseline", "warn", "privileged"), want: Policy{Enforce: b(Latest()), Audit: priv, Warn: priv}},
		{name: "bad warn fails open", labels: labels("enforce", "baseline", "warn", "foo"), want: Policy{Enforce: b(Latest()), Audit: priv, Warn: priv},
			errs: []string{`metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "foo": must be one of privileged, baseline, restricted`}},
		{name: "bad enforce fails closed and does not set warn", labels: labels("enforce", "foo"), want: Policy{Enforce: r(Latest()), Audit: priv, Warn: priv},
			errs: []string{`metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "foo": must be one of privileged, baseline, restricted`}},
		{name: "bad audit fails open", labels: labels("audit", "strict"), want: privileged,
			errs: []string{`metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "strict": must be one of privileged, baseline, restricted`}},
		{name: "bad version is latest", labels: labels("enforce", "restricted", "enforce-version", "1.25"), want: Policy{Enforce: r(Latest()), Audit: priv, Warn: r(Latest())},
			errs: []string{`metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.25": must be "latest" or "v1.x"`}},
		{name: "labels narrow restrictive defaults", labels: labels("enforce", "privileged"), defaults: Policy{r(Latest()), r(Latest()), b(Latest())},
			want: Policy{Enforce: priv, Audit: r(Latest()), Warn: b(Latest())}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.defaults
			if d == (Policy{}) {
				d = privileged
			}
			got, errs := PolicyFromLabels(tc.labels, d)
			if got != tc.want {
				t.Errorf("policy = %+v, want %+v", got, tc.want)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors = %v, want %v", errs, tc.errs)
			}
			for i, e := range errs {
				if e.Error() != tc.errs[i] {
					t.Errorf("error %d = %q, want %q", i, e.Error(), tc.errs[i])
				}
			}
		})
	}
}
