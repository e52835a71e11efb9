package validation

import (
	"fmt"
	"math"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/flowcontrol/bootstrap"
)

// The rules of upstream's pkg/apis/flowcontrol/validation, for v1.

const (
	flowSchemaMaxMatchingPrecedence int32 = 10000
	plcMaxQueues                    int32 = 10 * 1000 * 1000
	// shuffleShardingMaxHashBits is how many bits of a flow's hash
	// shuffle sharding may consume (upstream's shufflesharding.MaxHashBits).
	shuffleShardingMaxHashBits = 60
	flowcontrolNSErrIntro      = "each member of this list must be '*' or a DNS-1123 label; "
)

var (
	flowcontrolVerbs              = sets.New("get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy")
	flowcontrolDistinguishers     = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	flowcontrolSubjectKinds       = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	flowcontrolEnablements        = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	flowcontrolLimitResponseTypes = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
)

// validateFlowcontrolKind validates the kinds of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration).
func validateFlowcontrolKind(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *flowcontrolv1.FlowSchema:
		return validateFlowSchema(o), true
	case *flowcontrolv1.PriorityLevelConfiguration:
		return validatePriorityLevelConfiguration(o), true
	}
	return nil, false
}

// updateFlowcontrolKind validates updates of the kinds of flowcontrol.apiserver.k8s.io/v1 (FlowSchema, PriorityLevelConfiguration).
func updateFlowcontrolKind(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *flowcontrolv1.FlowSchema:
		return append(validateMetaUpdate(&o.ObjectMeta, &old.(*flowcontrolv1.FlowSchema).ObjectMeta), validateFlowSchema(o)...), true
	case *flowcontrolv1.PriorityLevelConfiguration:
		return append(validateMetaUpdate(&o.ObjectMeta, &old.(*flowcontrolv1.PriorityLevelConfiguration).ObjectMeta), validatePriorityLevelConfiguration(o)...), true
	}
	return nil, false
}

func validateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	errs := validateMeta(&fs.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateFlowSchemaSpec(fs.Name, &fs.Spec, specPath)...)
	for _, mand := range bootstrap.MandatoryFlowSchemas() {
		// The mandatory objects are fixed: the server keeps them as it made them.
		if mand.Name == fs.Name && !semanticEqual(fs.Spec, mand.Spec) {
			errs = append(errs, field.Invalid(specPath, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
		}
	}
	return append(errs, validateFlowSchemaStatus(&fs.Status, field.NewPath("status"))...)
}

func validateFlowSchemaSpec(name string, spec *flowcontrolv1.FlowSchemaSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	precedence := fldPath.Child("matchingPrecedence")
	if spec.MatchingPrecedence <= 0 {
		errs = append(errs, field.Invalid(precedence, spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > flowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(precedence, spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %v", flowSchemaMaxMatchingPrecedence)))
	}
	if spec.MatchingPrecedence == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(precedence, spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !sets.New(flowcontrolDistinguishers...).Has(string(dm.Type)) {
		errs = append(errs, field.NotSupported(fldPath.Child("distinguisherMethod").Child("type"), dm, flowcontrolDistinguishers))
	}
	plPath := fldPath.Child("priorityLevelConfiguration").Child("name")
	if pl := spec.PriorityLevelConfiguration.Name; pl != "" {
		errs = append(errs, messages(plPath, pl, apivalidation.NameIsDNSSubdomain(pl, false))...)
	} else {
		errs = append(errs, field.Required(plPath, "must reference a priority level"))
	}
	for i := range spec.Rules {
		errs = append(errs, validatePolicyRulesWithSubjects(&spec.Rules[i], fldPath.Child("rules").Index(i))...)
	}
	return errs
}

func validatePolicyRulesWithSubjects(rule *flowcontrolv1.PolicyRulesWithSubjects, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Subjects) == 0 {
		errs = append(errs, field.Required(fldPath.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		errs = append(errs, validateFlowSchemaSubject(&rule.Subjects[i], fldPath.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		errs = append(errs, field.Required(fldPath, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range rule.ResourceRules {
		errs = append(errs, validateResourcePolicyRule(&rule.ResourceRules[i], fldPath.Child("resourceRules").Index(i))...)
	}
	for i := range rule.NonResourceRules {
		errs = append(errs, validateNonResourcePolicyRule(&rule.NonResourceRules[i], fldPath.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

func validateFlowSchemaSubject(s *flowcontrolv1.Subject, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbidUser := func() {
		if s.User != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("user"), "user is forbidden when subject kind is not 'User'"))
		}
	}
	forbidGroup := func() {
		if s.Group != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("group"), "group is forbidden when subject kind is not 'Group'"))
		}
	}
	forbidServiceAccount := func() {
		if s.ServiceAccount != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("serviceAccount"), "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		errs = append(errs, validateServiceAccountSubject(s.ServiceAccount, fldPath.Child("serviceAccount"))...)
		forbidUser()
		forbidGroup()
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(fldPath.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("user").Child("name"), ""))
		}
		forbidServiceAccount()
		forbidGroup()
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(fldPath.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("group").Child("name"), ""))
		}
		forbidServiceAccount()
		forbidUser()
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("kind"), s.Kind, flowcontrolSubjectKinds))
	}
	return errs
}

func validateServiceAccountSubject(s *flowcontrolv1.ServiceAccountSubject, fldPath *field.Path) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(fldPath, "serviceAccount is required when subject kind is 'ServiceAccount'")}
	}
	var errs field.ErrorList
	switch {
	case s.Name == "":
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	case s.Name != flowcontrolv1.NameAll:
		errs = append(errs, messages(fldPath.Child("name"), s.Name, apivalidation.ValidateServiceAccountName(s.Name, false))...)
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(fldPath.Child("namespace"), "must specify namespace for service account"))
	} else {
		errs = append(errs, messages(fldPath.Child("namespace"), s.Namespace, apivalidation.ValidateNamespaceName(s.Namespace, false))...)
	}
	return errs
}

// validateRuleVerbs checks the verbs of a resource or non-resource rule:
// '*' alone, or only verbs flow control knows.
func validateRuleVerbs(verbs []string, fldPath *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(fldPath, "verbs must contain at least one value")}
	case hasFlowcontrolWildcard(verbs):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(fldPath, verbs, "if '*' is present, must not specify other verbs")}
		}
	case !flowcontrolVerbs.HasAll(verbs...):
		return field.ErrorList{field.NotSupported(fldPath, verbs, sets.List(flowcontrolVerbs))}
	}
	return nil
}

func validateNonResourcePolicyRule(rule *flowcontrolv1.NonResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	errs := validateRuleVerbs(rule.Verbs, fldPath.Child("verbs"))
	urls := fldPath.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		errs = append(errs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case hasFlowcontrolWildcard(rule.NonResourceURLs):
		if len(rule.NonResourceURLs) > 1 {
			errs = append(errs, field.Invalid(urls, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range rule.NonResourceURLs {
			if err := validateNonResourceURLPath(u, urls.Index(i)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

func validateResourcePolicyRule(rule *flowcontrolv1.ResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	errs := validateRuleVerbs(rule.Verbs, fldPath.Child("verbs"))
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(fldPath.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && hasFlowcontrolWildcard(rule.APIGroups) {
		errs = append(errs, field.Invalid(fldPath.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(fldPath.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && hasFlowcontrolWildcard(rule.Resources) {
		errs = append(errs, field.Invalid(fldPath.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	ns := fldPath.Child("namespaces")
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		errs = append(errs, field.Required(ns, "resource rules that are not cluster scoped must supply at least one namespace"))
	case hasFlowcontrolWildcard(rule.Namespaces):
		if len(rule.Namespaces) > 1 {
			errs = append(errs, field.Invalid(ns, rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, n := range rule.Namespaces {
			for _, msg := range apivalidation.ValidateNamespaceName(n, false) {
				errs = append(errs, field.Invalid(ns.Index(i), n, flowcontrolNSErrIntro+msg))
			}
		}
	}
	return errs
}

func validateFlowSchemaStatus(status *flowcontrolv1.FlowSchemaStatus, fldPath *field.Path) field.ErrorList {
	types := make([]string, len(status.Conditions))
	for i, c := range status.Conditions {
		types[i] = string(c.Type)
	}
	return validateConditionTypes(types, fldPath.Child("conditions"))
}

// validateConditionTypes checks that each condition has a type, and a type
// of its own.
func validateConditionTypes(types []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, t := range types {
		if seen.Has(t) {
			errs = append(errs, field.Duplicate(fldPath.Index(i).Child("type"), t))
		}
		seen.Insert(t)
		if t == "" {
			errs = append(errs, field.Required(fldPath.Index(i).Child("type"), ""))
		}
	}
	return errs
}

func validatePriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	errs := validateMeta(&pl.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	// The v1beta3 round-trip annotation has no meaning in v1.
	const preserveZeroShares = "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares"
	if _, ok := pl.Annotations[preserveZeroShares]; ok {
		errs = append(errs, field.Forbidden(metaPath.Child("annotations"), fmt.Sprintf("annotation '%s' is forbidden", preserveZeroShares)))
	}
	errs = append(errs, validatePriorityLevelSpec(&pl.Spec, pl.Name, specPath)...)
	errs = append(errs, validateMandatoryPriorityLevel(pl, specPath)...)
	types := make([]string, len(pl.Status.Conditions))
	for i, c := range pl.Status.Conditions {
		types[i] = string(c.Type)
	}
	return append(errs, validateConditionTypes(types, field.NewPath("status").Child("conditions"))...)
}

// validateMandatoryPriorityLevel keeps the mandatory levels as the server
// made them; of exempt only spec.exempt may change.
func validateMandatoryPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration, fldPath *field.Path) field.ErrorList {
	for _, mand := range bootstrap.MandatoryPriorityLevelConfigurations() {
		if mand.Name != pl.Name {
			continue
		}
		if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
			have := pl.Spec.DeepCopy()
			have.Exempt = mand.Spec.Exempt
			if !semanticEqual(&mand.Spec, have) {
				return field.ErrorList{field.Invalid(fldPath, pl.Spec, fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name))}
			}
			return nil
		}
		if !semanticEqual(pl.Spec, mand.Spec) {
			return field.ErrorList{field.Invalid(fldPath, pl.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name))}
		}
	}
	return nil
}

func validatePriorityLevelSpec(spec *flowcontrolv1.PriorityLevelConfigurationSpec, name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(fldPath.Child("type"), spec.Type, "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			p := fldPath.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			errs = append(errs, validateLendablePercent(e.LendablePercent, p.Child("lendablePercent"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("exempt"), "must be nil if the type is Limited"))
		}
		if spec.Limited == nil {
			errs = append(errs, field.Required(fldPath.Child("limited"), "must not be empty when type is Limited"))
		} else {
			errs = append(errs, validateLimitedPriorityLevel(spec.Limited, fldPath.Child("limited"))...)
		}
	case "":
		errs = append(errs, field.Required(fldPath.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("type"), spec.Type, flowcontrolEnablements))
	}
	return errs
}

func validateLendablePercent(p *int32, fldPath *field.Path) field.ErrorList {
	if p != nil && (*p < 0 || *p > 100) {
		return field.ErrorList{field.Invalid(fldPath, *p, "must be between 0 and 100, inclusive")}
	}
	return nil
}

func validateLimitedPriorityLevel(l *flowcontrolv1.LimitedPriorityLevelConfiguration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l.NominalConcurrencyShares != nil && *l.NominalConcurrencyShares < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("nominalConcurrencyShares"), *l.NominalConcurrencyShares, "must be a non-negative integer"))
	}
	errs = append(errs, validateLimitResponse(l.LimitResponse, fldPath.Child("limitResponse"))...)
	errs = append(errs, validateLendablePercent(l.LendablePercent, fldPath.Child("lendablePercent"))...)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	return errs
}

func validateLimitResponse(lr flowcontrolv1.LimitResponse, fldPath *field.Path) field.ErrorList {
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited")}
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			return field.ErrorList{field.Required(fldPath.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited")}
		}
		return validateQueuing(lr.Queuing, fldPath.Child("queuing"))
	case "":
		return field.ErrorList{field.Required(fldPath.Child("type"), "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath.Child("type"), lr.Type, flowcontrolLimitResponseTypes)}
	}
	return nil
}

func validateQueuing(q *flowcontrolv1.QueuingConfiguration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > plcMaxQueues {
		errs = append(errs, field.Invalid(fldPath.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", plcMaxQueues)))
	}
	hand := fldPath.Child("handSize")
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(hand, q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(hand, q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case shuffleShardingEntropyBits(q.Queues, q.HandSize) > shuffleShardingMaxHashBits:
		errs = append(errs, field.Invalid(hand, q.HandSize,
			fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, shuffleShardingMaxHashBits)))
	}
	return errs
}

// shuffleShardingEntropyBits is upstream's slightly conservative estimate of
// the hash bits that dealing a hand of handSize from deckSize cards uses.
func shuffleShardingEntropyBits(deckSize, handSize int32) int {
	return int(math.Ceil(math.Log2(float64(deckSize)) * float64(handSize)))
}

// validateNonResourceURLPath: a leading slash, no white space, no double
// slash, and '*' only as a whole last segment.
func validateNonResourceURLPath(path string, fldPath *field.Path) *field.Error {
	switch {
	case path == "":
		return field.Invalid(fldPath, path, "must not be empty")
	case path == "/":
		return nil
	case !strings.HasPrefix(path, "/"):
		return field.Invalid(fldPath, path, "must start with slash")
	case strings.Contains(path, " "):
		return field.Invalid(fldPath, path, "must not contain white-space")
	case strings.Contains(path, "//"):
		return field.Invalid(fldPath, path, "must not contain double slash")
	}
	if n := strings.Count(path, "*"); n > 1 || (n == 1 && !strings.HasSuffix(path, "/*")) {
		return field.Invalid(fldPath, path, "wildcard can only do suffix matching")
	}
	return nil
}

func hasFlowcontrolWildcard(values []string) bool {
	for _, v := range values {
		if v == "*" {
			return true
		}
	}
	return false
}
