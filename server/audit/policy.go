package audit

import (
	"errors"
	"fmt"
	"os"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Attributes describe a request for the policy: upstream's authorizer
// attributes.
type Attributes struct {
	// User is nil for a request whose credentials were refused.
	User            *authenticationv1.UserInfo
	Verb            string
	ResourceRequest bool
	// Path is the URL path (what nonResourceURLs match).
	Path                                                         string
	APIGroup, APIVersion, Namespace, Resource, Subresource, Name string
}

// RequestConfig is what the policy decided for one request.
type RequestConfig struct {
	Level             Level
	OmitStages        []Stage
	OmitManagedFields bool
}

// LoadPolicyFile reads a policy file (YAML or JSON). Warnings are fields
// it does not know, which upstream also only warns about.
func LoadPolicyFile(path string) (*Policy, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read audit policy: %w", err)
	}
	p, warnings, err := ParsePolicy(data)
	if err != nil {
		return nil, nil, fmt.Errorf("audit policy %s: %w", path, err)
	}
	return p, warnings, nil
}

// ParsePolicy decodes and validates a policy as upstream's
// LoadPolicyFromBytes: apiVersion audit.k8s.io/v1, kind Policy, at least
// one rule, and every field valid (errors name the field, e.g.
// "rules[0].level: Unsupported value").
func ParsePolicy(data []byte) (*Policy, []string, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("failed decoding: %w", err)
	}
	p := &Policy{}
	strict, err := kjson.UnmarshalStrict(js, p, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, nil, fmt.Errorf("failed decoding: %w", err)
	}
	var warnings []string
	for _, e := range strict {
		warnings = append(warnings, e.Error())
	}
	switch {
	case p.APIVersion == "" || p.Kind == "":
		return nil, nil, errors.New("apiVersion and kind are required (audit.k8s.io/v1, Policy)")
	case p.APIVersion != GroupVersion:
		return nil, nil, fmt.Errorf("unknown group version field %s in policy (want %s)", p.APIVersion, GroupVersion)
	case p.Kind != "Policy":
		return nil, nil, fmt.Errorf("kind %q is not Policy", p.Kind)
	}
	if errs := validatePolicy(p); len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	if len(p.Rules) == 0 {
		return nil, nil, errors.New("loaded illegal policy with 0 rules")
	}
	return p, warnings, nil
}

var allStages = []string{string(StageRequestReceived), string(StageResponseStarted), string(StageResponseComplete), string(StagePanic)}

func validatePolicy(p *Policy) field.ErrorList {
	errs := validateStages(p.OmitStages, field.NewPath("omitStages"))
	for i, r := range p.Rules {
		errs = append(errs, validateRule(r, field.NewPath("rules").Index(i))...)
	}
	return errs
}

func validateRule(r PolicyRule, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch r.Level {
	case LevelNone, LevelMetadata, LevelRequest, LevelRequestResponse:
	case "":
		errs = append(errs, field.Required(path.Child("level"), ""))
	default:
		errs = append(errs, field.NotSupported(path.Child("level"), r.Level,
			[]string{string(LevelNone), string(LevelMetadata), string(LevelRequest), string(LevelRequestResponse)}))
	}
	for i, u := range r.NonResourceURLs {
		p := path.Child("nonResourceURLs").Index(i)
		if u == "*" {
			continue
		}
		if !strings.HasPrefix(u, "/") {
			errs = append(errs, field.Invalid(p, u, "non-resource URL rules must begin with a '/' character"))
		}
		if u != "" && strings.Contains(u[:len(u)-1], "*") {
			errs = append(errs, field.Invalid(p, u, "non-resource URL wildcards '*' must be the final character of the rule"))
		}
	}
	for _, gr := range r.Resources {
		p := path.Child("resources")
		if gr.Group != "" && gr.Group != "*" {
			if msgs := validation.NameIsDNSSubdomain(gr.Group, false); len(msgs) > 0 {
				errs = append(errs, field.Invalid(p.Child("group"), gr.Group, strings.Join(msgs, ",")))
			}
		}
		if len(gr.ResourceNames) > 0 && len(gr.Resources) == 0 {
			errs = append(errs, field.Invalid(p.Child("resourceNames"), gr.ResourceNames, "using resourceNames requires at least one resource"))
		}
	}
	errs = append(errs, validateStages(r.OmitStages, path.Child("omitStages"))...)
	if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
		errs = append(errs, field.Invalid(path.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
	}
	return errs
}

func validateStages(stages []Stage, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range stages {
		switch s {
		case StageRequestReceived, StageResponseStarted, StageResponseComplete, StagePanic:
		default:
			errs = append(errs, field.Invalid(path.Index(i), string(s), "allowed stages are "+strings.Join(allStages, ",")))
		}
	}
	return errs
}

// Evaluate returns the first matching rule's level and stages to omit
// (the rule's and the policy's), or None.
func (p *Policy) Evaluate(a Attributes) RequestConfig {
	for i := range p.Rules {
		r := &p.Rules[i]
		if !ruleMatches(r, a) {
			continue
		}
		omit := p.OmitManagedFields
		if r.OmitManagedFields != nil {
			omit = *r.OmitManagedFields
		}
		return RequestConfig{Level: r.Level, OmitStages: unionStages(p.OmitStages, r.OmitStages), OmitManagedFields: omit}
	}
	return RequestConfig{Level: LevelNone, OmitStages: p.OmitStages, OmitManagedFields: p.OmitManagedFields}
}

func unionStages(a, b []Stage) []Stage {
	if len(b) == 0 {
		return a
	}
	out := append([]Stage(nil), a...)
	for _, s := range b {
		if !has(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func has[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func ruleMatches(r *PolicyRule, a Attributes) bool {
	if len(r.Users) > 0 && (a.User == nil || !has(r.Users, a.User.Username)) {
		return false
	}
	if len(r.UserGroups) > 0 {
		if a.User == nil {
			return false
		}
		in := false
		for _, g := range a.User.Groups {
			if has(r.UserGroups, g) {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	if len(r.Verbs) > 0 && !has(r.Verbs, a.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return resourceMatches(r, a)
	}
	if len(r.NonResourceURLs) > 0 {
		return nonResourceMatches(r, a)
	}
	return true
}

func nonResourceMatches(r *PolicyRule, a Attributes) bool {
	if a.ResourceRequest {
		return false
	}
	for _, spec := range r.NonResourceURLs {
		if spec == "*" || spec == a.Path || (strings.HasSuffix(spec, "*") && strings.HasPrefix(a.Path, strings.TrimRight(spec, "*"))) {
			return true
		}
	}
	return false
}

func resourceMatches(r *PolicyRule, a Attributes) bool {
	if !a.ResourceRequest {
		return false
	}
	// A cluster-scoped request's namespace is "", which a rule may list.
	if len(r.Namespaces) > 0 && !has(r.Namespaces, a.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != a.APIGroup && gr.Group != "*" {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		if len(gr.ResourceNames) > 0 && !has(gr.ResourceNames, a.Name) {
			continue
		}
		for _, res := range gr.Resources {
			switch {
			case res == combined || res == "*":
				return true
			case a.Subresource != "" && strings.HasPrefix(res, "*/") && a.Subresource == strings.TrimPrefix(res, "*/"):
				return true
			case strings.HasSuffix(res, "/*") && a.Resource == strings.TrimSuffix(res, "/*"):
				return true
			}
		}
	}
	return false
}
