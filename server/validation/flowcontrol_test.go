package validation

import (
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"skiff/server/flowcontrol/bootstrap"
)

func validFlowSchema() *flowcontrolv1.FlowSchema {
	return &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			MatchingPrecedence:         500,
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{
					{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}},
					{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "default", Name: "*"}},
				},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}, Namespaces: []string{"default"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/apis/*"}}},
			}},
		},
	}
}

func TestValidateFlowSchema_Invalid_UpstreamPaths(t *testing.T) {
	rule := func(fs *flowcontrolv1.FlowSchema) *flowcontrolv1.PolicyRulesWithSubjects { return &fs.Spec.Rules[0] }
	runCreateCases(t, validFlowSchema, []errCase[*flowcontrolv1.FlowSchema]{
		{"zero precedence", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 0 }, field.ErrorTypeInvalid, "spec.matchingPrecedence", "must be a positive value"},
		{"precedence over 10000", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 10001 }, field.ErrorTypeInvalid, "spec.matchingPrecedence", "must not be greater than 10000"},
		{"precedence 1 is exempt's", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 1 }, field.ErrorTypeInvalid, "spec.matchingPrecedence", "only the schema named 'exempt'"},
		{"unknown distinguisher", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.DistinguisherMethod.Type = "ByColor" }, field.ErrorTypeNotSupported, "spec.distinguisherMethod.type", ""},
		{"no priority level", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.PriorityLevelConfiguration.Name = "" }, field.ErrorTypeRequired, "spec.priorityLevelConfiguration.name", "must reference a priority level"},
		{"bad priority level name", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.PriorityLevelConfiguration.Name = "Bad_Name" }, field.ErrorTypeInvalid, "spec.priorityLevelConfiguration.name", ""},
		{"no subjects", func(fs *flowcontrolv1.FlowSchema) { rule(fs).Subjects = nil }, field.ErrorTypeRequired, "spec.rules[0].subjects", "at least one value"},
		{"no rules of either kind", func(fs *flowcontrolv1.FlowSchema) { rule(fs).ResourceRules, rule(fs).NonResourceRules = nil, nil }, field.ErrorTypeRequired, "spec.rules[0]", "at least one of resourceRules and nonResourceRules"},
		{"unknown subject kind", func(fs *flowcontrolv1.FlowSchema) { rule(fs).Subjects[0].Kind = "Robot" }, field.ErrorTypeNotSupported, "spec.rules[0].subjects[0].kind", ""},
		{"user subject without user", func(fs *flowcontrolv1.FlowSchema) { rule(fs).Subjects[0].User = nil }, field.ErrorTypeRequired, "spec.rules[0].subjects[0].user", ""},
		{"user subject with a group", func(fs *flowcontrolv1.FlowSchema) {
			rule(fs).Subjects[0].Group = &flowcontrolv1.GroupSubject{Name: "g"}
		}, field.ErrorTypeForbidden, "spec.rules[0].subjects[0].group", ""},
		{"service account without namespace", func(fs *flowcontrolv1.FlowSchema) { rule(fs).Subjects[1].ServiceAccount.Namespace = "" }, field.ErrorTypeRequired, "spec.rules[0].subjects[1].serviceAccount.namespace", ""},
		{"service account bad name", func(fs *flowcontrolv1.FlowSchema) { rule(fs).Subjects[1].ServiceAccount.Name = "Not_OK" }, field.ErrorTypeInvalid, "spec.rules[0].subjects[1].serviceAccount.name", ""},
		{"unknown verb", func(fs *flowcontrolv1.FlowSchema) { rule(fs).ResourceRules[0].Verbs = []string{"get", "bind"} }, field.ErrorTypeNotSupported, "spec.rules[0].resourceRules[0].verbs", ""},
		{"wildcard verb with company", func(fs *flowcontrolv1.FlowSchema) { rule(fs).ResourceRules[0].Verbs = []string{"*", "get"} }, field.ErrorTypeInvalid, "spec.rules[0].resourceRules[0].verbs", "if '*' is present"},
		{"no api groups", func(fs *flowcontrolv1.FlowSchema) { rule(fs).ResourceRules[0].APIGroups = nil }, field.ErrorTypeRequired, "spec.rules[0].resourceRules[0].apiGroups", ""},
		{"wildcard resource with company", func(fs *flowcontrolv1.FlowSchema) { rule(fs).ResourceRules[0].Resources = []string{"pods", "*"} }, field.ErrorTypeInvalid, "spec.rules[0].resourceRules[0].resources", ""},
		{"namespaced rule without namespaces", func(fs *flowcontrolv1.FlowSchema) { rule(fs).ResourceRules[0].Namespaces = nil }, field.ErrorTypeRequired, "spec.rules[0].resourceRules[0].namespaces", "not cluster scoped"},
		{"bad namespace", func(fs *flowcontrolv1.FlowSchema) { rule(fs).ResourceRules[0].Namespaces = []string{"Bad NS"} }, field.ErrorTypeInvalid, "spec.rules[0].resourceRules[0].namespaces[0]", "must be '*' or a DNS-1123 label"},
		{"url without slash", func(fs *flowcontrolv1.FlowSchema) { rule(fs).NonResourceRules[0].NonResourceURLs = []string{"healthz"} }, field.ErrorTypeInvalid, "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]", "must start with slash"},
		{"url with inner wildcard", func(fs *flowcontrolv1.FlowSchema) { rule(fs).NonResourceRules[0].NonResourceURLs = []string{"/a/*/b"} }, field.ErrorTypeInvalid, "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]", "suffix matching"},
		{"duplicate condition", func(fs *flowcontrolv1.FlowSchema) {
			fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling"}, {Type: "Dangling"}}
		}, field.ErrorTypeDuplicate, "status.conditions[1].type", ""},
		{"condition without type", func(fs *flowcontrolv1.FlowSchema) {
			fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Status: "True"}}
		}, field.ErrorTypeRequired, "status.conditions[0].type", ""},
	})
}

func validPriorityLevel() *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To(int32(0)), // allowed in v1
				LendablePercent:          ptr.To(int32(50)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 8, QueueLengthLimit: 50}},
			},
		},
	}
}

func TestValidatePriorityLevel_Invalid_UpstreamPaths(t *testing.T) {
	queuing := func(pl *flowcontrolv1.PriorityLevelConfiguration) *flowcontrolv1.QueuingConfiguration {
		return pl.Spec.Limited.LimitResponse.Queuing
	}
	runCreateCases(t, validPriorityLevel, []errCase[*flowcontrolv1.PriorityLevelConfiguration]{
		{"no type", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Type = "" }, field.ErrorTypeRequired, "spec.type", ""},
		{"unknown type", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Type = "Sometimes" }, field.ErrorTypeNotSupported, "spec.type", ""},
		{"exempt type needs the exempt name", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec = flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt}
		}, field.ErrorTypeInvalid, "spec.type", "must be 'Exempt' if and only if `name` is 'exempt'"},
		{"limited without limited", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Limited = nil }, field.ErrorTypeRequired, "spec.limited", ""},
		{"limited with exempt", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Exempt = &flowcontrolv1.ExemptPriorityLevelConfiguration{}
		}, field.ErrorTypeForbidden, "spec.exempt", ""},
		{"negative shares", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(-1))
		}, field.ErrorTypeInvalid, "spec.limited.nominalConcurrencyShares", "non-negative"},
		{"lendable over 100", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LendablePercent = ptr.To(int32(101))
		}, field.ErrorTypeInvalid, "spec.limited.lendablePercent", "between 0 and 100"},
		{"negative borrowing", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.BorrowingLimitPercent = ptr.To(int32(-1))
		}, field.ErrorTypeInvalid, "spec.limited.borrowingLimitPercent", ""},
		{"no limit response type", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Limited.LimitResponse.Type = "" }, field.ErrorTypeRequired, "spec.limited.limitResponse.type", ""},
		{"queue without queuing", func(pl *flowcontrolv1.PriorityLevelConfiguration) { pl.Spec.Limited.LimitResponse.Queuing = nil }, field.ErrorTypeRequired, "spec.limited.limitResponse.queuing", ""},
		{"reject with queuing", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Spec.Limited.LimitResponse.Type = flowcontrolv1.LimitResponseTypeReject
		}, field.ErrorTypeForbidden, "spec.limited.limitResponse.queuing", ""},
		{"zero queue length", func(pl *flowcontrolv1.PriorityLevelConfiguration) { queuing(pl).QueueLengthLimit = 0 }, field.ErrorTypeInvalid, "spec.limited.limitResponse.queuing.queueLengthLimit", "must be positive"},
		{"too many queues", func(pl *flowcontrolv1.PriorityLevelConfiguration) { queuing(pl).Queues = 10*1000*1000 + 1 }, field.ErrorTypeInvalid, "spec.limited.limitResponse.queuing.queues", "must not be greater than 10000000"},
		{"hand larger than deck", func(pl *flowcontrolv1.PriorityLevelConfiguration) { queuing(pl).HandSize = 65 }, field.ErrorTypeInvalid, "spec.limited.limitResponse.queuing.handSize", "should not be greater than queues (64)"},
		{"hand needing too much entropy", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			queuing(pl).Queues, queuing(pl).HandSize = 1<<20, 4
		}, field.ErrorTypeInvalid, "spec.limited.limitResponse.queuing.handSize", "required entropy bits"},
		{"v1beta3 annotation", func(pl *flowcontrolv1.PriorityLevelConfiguration) {
			pl.Annotations = map[string]string{"flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares": "true"}
		}, field.ErrorTypeForbidden, "metadata.annotations", ""},
	})
}

func TestValidateFlowcontrol_MandatoryObjects_FixedSpecs(t *testing.T) {
	catchAll := bootstrap.MandatoryFlowSchemaCatchAll()
	catchAll.Spec.MatchingPrecedence = 9999
	expectError(t, Validate(catchAll), field.ErrorTypeInvalid, "spec", "spec of 'catch-all' must equal the fixed value")

	pl := bootstrap.MandatoryPriorityLevelCatchAll()
	pl.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(6))
	expectError(t, Validate(pl), field.ErrorTypeInvalid, "spec", "spec of 'catch-all' must equal the fixed value")

	// Of exempt, only spec.exempt may be tuned.
	exempt := bootstrap.MandatoryPriorityLevelExempt()
	exempt.Spec.Exempt.NominalConcurrencyShares = ptr.To(int32(10))
	expectNoErrors(t, Validate(exempt))
	for _, obj := range bootstrap.MandatoryFlowSchemas() {
		expectNoErrors(t, Validate(obj))
	}
}

func TestValidateFlowcontrolUpdate_NameChange_Rejected(t *testing.T) {
	stored := func() *flowcontrolv1.FlowSchema {
		fs := validFlowSchema()
		fs.ResourceVersion = "5"
		return fs
	}
	runUpdateCases(t, stored, []updateCase[*flowcontrolv1.FlowSchema]{
		{"spec change", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = 600 }, "", "", ""},
		{"rename", func(fs *flowcontrolv1.FlowSchema) { fs.Name = "other" }, field.ErrorTypeInvalid, "metadata.name", ""},
		{"invalid spec", func(fs *flowcontrolv1.FlowSchema) { fs.Spec.MatchingPrecedence = -1 }, field.ErrorTypeInvalid, "spec.matchingPrecedence", ""},
	})
}
