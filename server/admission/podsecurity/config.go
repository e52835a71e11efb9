package podsecurity

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Config is what upstream's PodSecurityConfiguration holds: the policy of
// namespaces without labels, and who and what is never checked.
type Config struct {
	Defaults   Defaults   `json:"defaults"`
	Exemptions Exemptions `json:"exemptions"`
}

// Defaults are levels and versions as the namespace labels spell them.
type Defaults struct {
	Enforce        string `json:"enforce,omitempty"`
	EnforceVersion string `json:"enforce-version,omitempty"`
	Audit          string `json:"audit,omitempty"`
	AuditVersion   string `json:"audit-version,omitempty"`
	Warn           string `json:"warn,omitempty"`
	WarnVersion    string `json:"warn-version,omitempty"`
}

// Exemptions are never checked: requests by these users, in these
// namespaces, and pods of these runtime classes.
type Exemptions struct {
	Usernames      []string `json:"usernames,omitempty"`
	Namespaces     []string `json:"namespaces,omitempty"`
	RuntimeClasses []string `json:"runtimeClasses,omitempty"`
}

// PluginName is the name of the plugin in an AdmissionConfiguration.
const PluginName = "PodSecurity"

// ErrConfig marks a configuration that cannot be used.
var ErrConfig = errors.New("invalid PodSecurity configuration")

var (
	configGroup         = "pod-security.admission.config.k8s.io"
	configVersions      = []string{"v1", "v1beta1", "v1alpha1"}
	admissionAPIVersion = []string{"apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1", "apiserver.k8s.io/v1alpha1"}
)

// withDefaults fills unset defaults as upstream's v1 defaulting does:
// privileged at latest, so a cluster without configuration checks nothing.
func (c Config) withDefaults() Config {
	set := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	d := &c.Defaults
	set(&d.Enforce, string(LevelPrivileged))
	set(&d.Audit, string(LevelPrivileged))
	set(&d.Warn, string(LevelPrivileged))
	set(&d.EnforceVersion, "latest")
	set(&d.AuditVersion, "latest")
	set(&d.WarnVersion, "latest")
	return c
}

// Validate reports the errors upstream's configuration validation does.
func (c Config) Validate() error {
	var errs field.ErrorList
	defaults := field.NewPath("defaults")
	for _, f := range []struct{ name, value string }{
		{"enforce", c.Defaults.Enforce}, {"warn", c.Defaults.Warn}, {"audit", c.Defaults.Audit},
	} {
		if _, err := ParseLevel(f.value); err != nil {
			errs = append(errs, field.Invalid(defaults.Child(f.name), f.value, err.Error()))
		}
	}
	for _, f := range []struct{ name, value string }{
		{"enforce-version", c.Defaults.EnforceVersion}, {"warn-version", c.Defaults.WarnVersion}, {"audit-version", c.Defaults.AuditVersion},
	} {
		if _, err := ParseVersion(f.value); err != nil {
			errs = append(errs, field.Invalid(defaults.Child(f.name), f.value, err.Error()))
		}
	}
	exemptions := field.NewPath("exemptions")
	errs = append(errs, uniqueValid(exemptions.Child("namespaces"), c.Exemptions.Namespaces, func(s string) []string {
		return apivalidation.ValidateNamespaceName(s, false)
	})...)
	errs = append(errs, uniqueValid(exemptions.Child("runtimeClasses"), c.Exemptions.RuntimeClasses, func(s string) []string {
		return apivalidation.NameIsDNSSubdomain(s, false)
	})...)
	errs = append(errs, uniqueValid(exemptions.Child("usernames"), c.Exemptions.Usernames, func(s string) []string {
		if s == "" {
			return []string{"username must not be empty"}
		}
		return nil
	})...)
	if agg := errs.ToAggregate(); agg != nil {
		return fmt.Errorf("%w: %w", ErrConfig, agg)
	}
	return nil
}

func uniqueValid(path *field.Path, values []string, validate func(string) []string) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, v := range values {
		if msgs := validate(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Index(i), v, strings.Join(msgs, ", ")))
			continue
		}
		if seen.Has(v) {
			errs = append(errs, field.Duplicate(path.Index(i), v))
			continue
		}
		seen.Insert(v)
	}
	return errs
}

// policy is the defaults as a Policy; the config must be valid.
func (c Config) policy() (Policy, error) {
	if err := c.Validate(); err != nil {
		return Policy{}, err
	}
	var p Policy
	p.Enforce.Level, _ = ParseLevel(c.Defaults.Enforce)
	p.Enforce.Version, _ = ParseVersion(c.Defaults.EnforceVersion)
	p.Audit.Level, _ = ParseLevel(c.Defaults.Audit)
	p.Audit.Version, _ = ParseVersion(c.Defaults.AuditVersion)
	p.Warn.Level, _ = ParseLevel(c.Defaults.Warn)
	p.Warn.Version, _ = ParseVersion(c.Defaults.WarnVersion)
	return p, nil
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

type podSecurityConfiguration struct {
	typeMeta
	Defaults   Defaults   `json:"defaults"`
	Exemptions Exemptions `json:"exemptions"`
}

type admissionConfiguration struct {
	typeMeta
	Plugins []struct {
		Name          string          `json:"name"`
		Path          string          `json:"path,omitempty"`
		Configuration json.RawMessage `json:"configuration,omitempty"`
	} `json:"plugins"`
}

// LoadConfigFile reads a PodSecurityConfiguration file, or an
// AdmissionConfiguration file (what --admission-control-config-file names)
// whose PodSecurity entry embeds one or names its file (relative to the
// AdmissionConfiguration's directory). An empty path, or an
// AdmissionConfiguration without a PodSecurity entry, is the default
// configuration.
func LoadConfigFile(path string) (Config, error) {
	if path == "" {
		return ParseConfig(nil, "")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("pod security configuration: %w", err)
	}
	return ParseConfig(data, filepath.Dir(path))
}

// ParseConfig reads a configuration in either form LoadConfigFile accepts
// (YAML or JSON); baseDir resolves a relative plugin path. Unknown fields
// are errors, as in upstream's strict decoding.
func ParseConfig(data []byte, baseDir string) (Config, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return Config{}.withDefaults(), nil
	}
	var tm typeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if tm.Kind == "AdmissionConfiguration" && slices.Contains(admissionAPIVersion, tm.APIVersion) {
		return parseAdmissionConfiguration(data, baseDir)
	}
	return parsePodSecurityConfiguration(data)
}

func parseAdmissionConfiguration(data []byte, baseDir string) (Config, error) {
	var ac admissionConfiguration
	if err := yaml.UnmarshalStrict(data, &ac); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, p := range ac.Plugins {
		if p.Name != PluginName {
			continue
		}
		switch {
		case len(p.Configuration) > 0 && string(p.Configuration) != "null":
			return parsePodSecurityConfiguration(p.Configuration)
		case p.Path != "":
			path := p.Path
			if !filepath.IsAbs(path) {
				path = filepath.Join(baseDir, path)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return Config{}, fmt.Errorf("pod security configuration: %w", err)
			}
			return parsePodSecurityConfiguration(data)
		}
	}
	return Config{}.withDefaults(), nil
}

func parsePodSecurityConfiguration(data []byte) (Config, error) {
	var pc podSecurityConfiguration
	if err := yaml.UnmarshalStrict(data, &pc); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	group, version, _ := strings.Cut(pc.APIVersion, "/")
	if pc.Kind != "PodSecurityConfiguration" || group != configGroup || !slices.Contains(configVersions, version) {
		return Config{}, fmt.Errorf("%w: want apiVersion %s/v1 and kind PodSecurityConfiguration, got apiVersion %q and kind %q",
			ErrConfig, configGroup, pc.APIVersion, pc.Kind)
	}
	c := Config{Defaults: pc.Defaults, Exemptions: pc.Exemptions}.withDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}
