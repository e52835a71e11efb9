// Package bootstrap holds the API Priority and Fairness objects every
// cluster starts with: the mandatory exempt and catch-all FlowSchemas and
// priority levels, and the suggested ones for system components, with the
// specs of upstream's apiserver/pkg/apis/flowcontrol/bootstrap. Validation
// reads the mandatory specs (they may not be changed), the flow-control
// package creates and maintains all of them.
//
// Every function returns fresh objects, so a caller may change what it gets.
// The specs are already defaulted: the server's defaulting leaves them as
// they are, so a stored object can be compared with its bootstrap spec.
package bootstrap

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Identities the suggested FlowSchemas name.
const (
	groupMasters         = "system:masters"
	groupAuthenticated   = "system:authenticated"
	groupUnauthenticated = "system:unauthenticated"
	groupNodes           = "system:nodes"
	groupServiceAccounts = "system:serviceaccounts"
	userControllerMgr    = "system:kube-controller-manager"
	userScheduler        = "system:kube-scheduler"
)

// MandatoryPriorityLevelConfigurations are catch-all and exempt.
func MandatoryPriorityLevelConfigurations() []*flowcontrolv1.PriorityLevelConfiguration {
	return []*flowcontrolv1.PriorityLevelConfiguration{MandatoryPriorityLevelCatchAll(), MandatoryPriorityLevelExempt()}
}

// MandatoryFlowSchemas are exempt and catch-all.
func MandatoryFlowSchemas() []*flowcontrolv1.FlowSchema {
	return []*flowcontrolv1.FlowSchema{MandatoryFlowSchemaExempt(), MandatoryFlowSchemaCatchAll()}
}

// MandatoryPriorityLevelExempt is the level whose requests never wait.
func MandatoryPriorityLevelExempt() *flowcontrolv1.PriorityLevelConfiguration {
	return priorityLevel(flowcontrolv1.PriorityLevelConfigurationNameExempt, flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementExempt,
		Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To(int32(0)),
			LendablePercent:          ptr.To(int32(0)),
		},
	})
}

// MandatoryPriorityLevelCatchAll gets what no other FlowSchema matches.
func MandatoryPriorityLevelCatchAll() *flowcontrolv1.PriorityLevelConfiguration {
	return priorityLevel(flowcontrolv1.PriorityLevelConfigurationNameCatchAll, flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To(int32(5)),
			LendablePercent:          ptr.To(int32(0)),
			LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
		},
	})
}

// MandatoryFlowSchemaExempt exempts system:masters, so an administrator
// can always reach the server.
func MandatoryFlowSchemaExempt() *flowcontrolv1.FlowSchema {
	return flowSchema(flowcontrolv1.FlowSchemaNameExempt, flowcontrolv1.PriorityLevelConfigurationNameExempt, 1, "",
		flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:         groups(groupMasters),
			ResourceRules:    []flowcontrolv1.ResourcePolicyRule{allResources()},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{allNonResources()},
		})
}

// MandatoryFlowSchemaCatchAll matches every request, last.
func MandatoryFlowSchemaCatchAll() *flowcontrolv1.FlowSchema {
	return flowSchema(flowcontrolv1.FlowSchemaNameCatchAll, flowcontrolv1.PriorityLevelConfigurationNameCatchAll, 10000, flowcontrolv1.FlowDistinguisherMethodByUserType,
		flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:         groups(groupUnauthenticated, groupAuthenticated),
			ResourceRules:    []flowcontrolv1.ResourcePolicyRule{allResources()},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{allNonResources()},
		})
}

// SuggestedPriorityLevelConfigurations are the levels for system
// components and workloads.
func SuggestedPriorityLevelConfigurations() []*flowcontrolv1.PriorityLevelConfiguration {
	return []*flowcontrolv1.PriorityLevelConfiguration{
		// system components that keep the cluster and its pods running
		queuing("system", 30, 33, 64, 6, 50),
		// node health, apart from "system" so nodes report even under pod-startup load
		queuing("node-high", 40, 25, 64, 6, 50),
		// controllers' leader election
		queuing("leader-election", 10, 0, 16, 4, 50),
		// the scheduler, the controller manager and kube-system service accounts
		queuing("workload-high", 40, 50, 128, 6, 50),
		// other service accounts
		queuing("workload-low", 100, 90, 128, 6, 50),
		// everything else
		queuing("global-default", 20, 50, 128, 6, 50),
	}
}

// SuggestedFlowSchemas route system components to the suggested levels.
func SuggestedFlowSchemas() []*flowcontrolv1.FlowSchema {
	everything := func(subjects []flowcontrolv1.Subject) flowcontrolv1.PolicyRulesWithSubjects {
		return flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:         subjects,
			ResourceRules:    []flowcontrolv1.ResourcePolicyRule{allResources()},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{allNonResources()},
		}
	}
	byUser, byNamespace := flowcontrolv1.FlowDistinguisherMethodByUserType, flowcontrolv1.FlowDistinguisherMethodByNamespaceType
	return []*flowcontrolv1.FlowSchema{
		flowSchema("system-nodes", "system", 500, byUser, everything(groups(groupNodes))),
		flowSchema("system-node-high", "node-high", 400, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: groups(groupNodes),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{
				resourceRule([]string{flowcontrolv1.VerbAll}, []string{""}, []string{"nodes", "nodes/status"}, true),
				resourceRule([]string{flowcontrolv1.VerbAll}, []string{"coordination.k8s.io"}, []string{"leases"}, false),
			},
		}),
		flowSchema("probes", flowcontrolv1.PriorityLevelConfigurationNameExempt, 2, "", flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: groups(groupUnauthenticated, groupAuthenticated),
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{
				{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz", "/livez"}},
			},
		}),
		flowSchema("system-leader-election", "leader-election", 100, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: append(users(userControllerMgr, userScheduler), kubeSystemServiceAccounts()...),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{
				resourceRule([]string{"get", "create", "update"}, []string{"coordination.k8s.io"}, []string{"leases"}, false),
			},
		}),
		flowSchema("kube-controller-manager", "workload-high", 800, byNamespace, everything(users(userControllerMgr))),
		flowSchema("kube-scheduler", "workload-high", 800, byNamespace, everything(users(userScheduler))),
		flowSchema("kube-system-service-accounts", "workload-high", 900, byNamespace, everything(kubeSystemServiceAccounts())),
		flowSchema("service-accounts", "workload-low", 9000, byUser, everything(groups(groupServiceAccounts))),
		flowSchema("global-default", "global-default", 9900, byUser, everything(groups(groupUnauthenticated, groupAuthenticated))),
	}
}

func priorityLevel(name string, spec flowcontrolv1.PriorityLevelConfigurationSpec) *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}},
		Spec:       spec,
	}
}

func queuing(name string, shares, lendable, queues, handSize, queueLength int32) *flowcontrolv1.PriorityLevelConfiguration {
	return priorityLevel(name, flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To(shares),
			LendablePercent:          ptr.To(lendable),
			LimitResponse: flowcontrolv1.LimitResponse{
				Type:    flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: queues, HandSize: handSize, QueueLengthLimit: queueLength},
			},
		},
	})
}

func flowSchema(name, level string, precedence int32, method flowcontrolv1.FlowDistinguisherMethodType, rules ...flowcontrolv1.PolicyRulesWithSubjects) *flowcontrolv1.FlowSchema {
	var dm *flowcontrolv1.FlowDistinguisherMethod
	if method != "" {
		dm = &flowcontrolv1.FlowDistinguisherMethod{Type: method}
	}
	return &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         precedence,
			DistinguisherMethod:        dm,
			Rules:                      rules,
		},
	}
}

func groups(names ...string) []flowcontrolv1.Subject {
	out := make([]flowcontrolv1.Subject, len(names))
	for i, n := range names {
		out[i] = flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: n}}
	}
	return out
}

func users(names ...string) []flowcontrolv1.Subject {
	out := make([]flowcontrolv1.Subject, len(names))
	for i, n := range names {
		out[i] = flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: n}}
	}
	return out
}

func kubeSystemServiceAccounts() []flowcontrolv1.Subject {
	return []flowcontrolv1.Subject{{
		Kind:           flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: flowcontrolv1.NameAll, Namespace: metav1.NamespaceSystem},
	}}
}

func allResources() flowcontrolv1.ResourcePolicyRule {
	return resourceRule([]string{flowcontrolv1.VerbAll}, []string{flowcontrolv1.APIGroupAll}, []string{flowcontrolv1.ResourceAll}, true)
}

func allNonResources() flowcontrolv1.NonResourcePolicyRule {
	return flowcontrolv1.NonResourcePolicyRule{Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll}}
}

// resourceRule covers every namespace, and cluster-scoped objects when
// clusterScope is set.
func resourceRule(verbs, apiGroups, resources []string, clusterScope bool) flowcontrolv1.ResourcePolicyRule {
	return flowcontrolv1.ResourcePolicyRule{
		Verbs: verbs, APIGroups: apiGroups, Resources: resources,
		Namespaces: []string{flowcontrolv1.NamespaceEvery}, ClusterScope: clusterScope,
	}
}
