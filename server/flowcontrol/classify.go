package flowcontrol

import (
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"skiff/server/auth"
)

// The matching rules of upstream's apiserver/pkg/util/flowcontrol/rule.go:
// a FlowSchema matches a request when one of its rules matches both the
// caller (a subject) and what is asked (a resource or non-resource rule).

const serviceAccountPrefix = "system:serviceaccount:"

func matchesFlowSchema(a *auth.Attributes, fs *flowcontrolv1.FlowSchema) bool {
	for i := range fs.Spec.Rules {
		if matchesPolicyRule(a, &fs.Spec.Rules[i]) {
			return true
		}
	}
	return false
}

func matchesPolicyRule(a *auth.Attributes, rule *flowcontrolv1.PolicyRulesWithSubjects) bool {
	if !matchesASubject(a.User, rule.Subjects) {
		return false
	}
	if a.ResourceRequest {
		for _, rr := range rule.ResourceRules {
			if matchesResourceRule(a, rr) {
				return true
			}
		}
		return false
	}
	for _, nr := range rule.NonResourceRules {
		if containsOrWildcard(a.Verb, nr.Verbs, flowcontrolv1.VerbAll) && matchesNonResourceURL(nr.NonResourceURLs, a.Path) {
			return true
		}
	}
	return false
}

func matchesASubject(u *auth.User, subjects []flowcontrolv1.Subject) bool {
	for _, s := range subjects {
		if matchesSubject(u, s) {
			return true
		}
	}
	return false
}

func matchesSubject(u *auth.User, s flowcontrolv1.Subject) bool {
	name := ""
	if u != nil {
		name = u.Name
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindUser:
		return s.User != nil && (s.User.Name == flowcontrolv1.NameAll || s.User.Name == name)
	case flowcontrolv1.SubjectKindGroup:
		return s.Group != nil && (s.Group.Name == "*" || u.InGroup(s.Group.Name))
	case flowcontrolv1.SubjectKindServiceAccount:
		if s.ServiceAccount == nil {
			return false
		}
		rest, ok := strings.CutPrefix(name, serviceAccountPrefix)
		if !ok {
			return false
		}
		ns, sa, ok := strings.Cut(rest, ":")
		if !ok || ns != s.ServiceAccount.Namespace {
			return false
		}
		return s.ServiceAccount.Name == flowcontrolv1.NameAll || s.ServiceAccount.Name == sa
	}
	return false
}

func matchesResourceRule(a *auth.Attributes, rule flowcontrolv1.ResourcePolicyRule) bool {
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if !containsOrWildcard(a.Verb, rule.Verbs, flowcontrolv1.VerbAll) ||
		!containsOrWildcard(resource, rule.Resources, flowcontrolv1.ResourceAll) ||
		!containsOrWildcard(a.APIGroup, rule.APIGroups, flowcontrolv1.APIGroupAll) {
		return false
	}
	if a.Namespace == "" {
		return rule.ClusterScope
	}
	return containsOrWildcard(a.Namespace, rule.Namespaces, flowcontrolv1.NamespaceEvery)
}

// matchesNonResourceURL: "*", the exact path, or a "/prefix/*" rule for
// anything below the prefix.
func matchesNonResourceURL(rules []string, path string) bool {
	for _, r := range rules {
		if r == flowcontrolv1.NonResourceAll || r == path {
			return true
		}
		prefix := strings.TrimSuffix(r, "*")
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// containsOrWildcard reports whether x is in list, or list is the wildcard
// alone (validation keeps the wildcard from having company).
func containsOrWildcard(x string, list []string, wildcard string) bool {
	if len(list) == 1 && list[0] == wildcard {
		return true
	}
	for _, y := range list {
		if x == y {
			return true
		}
	}
	return false
}

// distinguisher is what tells one flow of a FlowSchema from another.
func distinguisher(a *auth.Attributes, fs *flowcontrolv1.FlowSchema) string {
	if fs.Spec.DistinguisherMethod == nil {
		return ""
	}
	switch fs.Spec.DistinguisherMethod.Type {
	case flowcontrolv1.FlowDistinguisherMethodByUserType:
		if a.User != nil {
			return a.User.Name
		}
	case flowcontrolv1.FlowDistinguisherMethodByNamespaceType:
		return a.Namespace
	}
	return ""
}
