package podsecurity

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var privilegedDefaults = Defaults{Enforce: "privileged", EnforceVersion: "latest", Audit: "privileged", AuditVersion: "latest", Warn: "privileged", WarnVersion: "latest"}

func TestParseConfig_Forms_ReadDefaultsAndExemptions(t *testing.T) {
	full := Config{
		Defaults:   Defaults{Enforce: "baseline", EnforceVersion: "v1.30", Audit: "restricted", AuditVersion: "latest", Warn: "restricted", WarnVersion: "latest"},
		Exemptions: Exemptions{Usernames: []string{"admin"}, Namespaces: []string{"kube-system"}, RuntimeClasses: []string{"kata"}},
	}
	const psc = `apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
  enforce-version: v1.30
  audit: restricted
  warn: restricted
exemptions:
  usernames: [admin]
  namespaces: [kube-system]
  runtimeClasses: [kata]
`
	cases := []struct {
		name string
		data string
		want Config
	}{
		{name: "empty is all privileged", data: "", want: Config{Defaults: privilegedDefaults}},
		{name: "PodSecurityConfiguration", data: psc, want: full},
		{name: "v1beta1 accepted", data: strings.Replace(psc, "/v1\n", "/v1beta1\n", 1), want: full},
		{name: "JSON", data: `{"apiVersion":"pod-security.admission.config.k8s.io/v1","kind":"PodSecurityConfiguration","defaults":{"enforce":"restricted"}}`,
			want: Config{Defaults: Defaults{Enforce: "restricted", EnforceVersion: "latest", Audit: "privileged", AuditVersion: "latest", Warn: "privileged", WarnVersion: "latest"}}},
		{name: "embedded in AdmissionConfiguration", data: `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  configuration:
    apiVersion: resourcequota.admission.k8s.io/v1beta1
    kind: Configuration
- name: PodSecurity
  configuration:
` + indent(psc, "    "), want: full},
		{name: "AdmissionConfiguration without PodSecurity", data: "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: []\n",
			want: Config{Defaults: privilegedDefaults}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.data), "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestLoadConfigFile_PluginPath_RelativeToAdmissionConfiguration(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "psa.yaml"), []byte("apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  warn: baseline\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admission := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(admission, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: psa.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfigFile(admission)
	if err != nil {
		t.Fatal(err)
	}
	if got.Defaults.Warn != "baseline" || got.Defaults.Enforce != "privileged" {
		t.Errorf("defaults = %+v", got.Defaults)
	}
	if _, err := LoadConfigFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseConfig_Invalid_Refused(t *testing.T) {
	head := "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\n"
	cases := []struct {
		name, data, want string
	}{
		{"bad level", head + "defaults:\n  enforce: strict\n", `defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted`},
		{"bad version", head + "defaults:\n  audit-version: v2.0\n", `defaults.audit-version: Invalid value: "v2.0": must be "latest" or "v1.x"`},
		{"bad namespace", head + "exemptions:\n  namespaces: [Kube_System]\n", `exemptions.namespaces[0]: Invalid value: "Kube_System"`},
		{"duplicate namespace", head + "exemptions:\n  namespaces: [a, a]\n", `exemptions.namespaces[1]: Duplicate value: "a"`},
		{"bad runtime class", head + "exemptions:\n  runtimeClasses: [\"Bad Class\"]\n", `exemptions.runtimeClasses[0]: Invalid value: "Bad Class"`},
		{"empty username", head + "exemptions:\n  usernames: [\"\"]\n", `exemptions.usernames[0]: Invalid value: "": username must not be empty`},
		{"unknown field", head + "defaults:\n  enforse: baseline\n", `unknown field "enforse"`},
		{"wrong kind", "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: Other\n", `kind "Other"`},
		{"wrong group", "apiVersion: example.com/v1\nkind: PodSecurityConfiguration\n", `apiVersion "example.com/v1"`},
		{"missing type", "defaults:\n  enforce: baseline\n", `apiVersion ""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.data), "")
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
