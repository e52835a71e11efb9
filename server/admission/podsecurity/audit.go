package podsecurity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/apiserver"
	"skiff/server/audit"
)

// The audit annotations Pod Security writes, as upstream's (under
// "pod-security.kubernetes.io/").
const (
	auditPrefix = "pod-security.kubernetes.io/"
	// exemptKey says why a request was not checked: namespace, user or
	// runtimeClass.
	exemptKey = "exempt"
	// enforcePolicyKey is the enforce level:version a pod was checked at.
	enforcePolicyKey = "enforce-policy"
	// auditViolationsKey is what the audit level would refuse.
	auditViolationsKey = "audit-violations"
)

func annotate(ctx context.Context, key, value string) {
	audit.AddAnnotation(ctx, auditPrefix+key, value)
}

// exempt reports (and annotates) a request of an exempt namespace or
// user, checked in upstream's order.
func (p *Plugin) exempt(ctx context.Context, a apiserver.AdmissionAttributes, ns string) bool {
	switch {
	case p.exemptNamespace(ns):
		annotate(ctx, exemptKey, "namespace")
	case p.exemptUser(a):
		annotate(ctx, exemptKey, "user")
	default:
		return false
	}
	return true
}

// auditViolations annotates what the namespace's audit level would
// refuse; enforced is the enforce verdict, reused when audit is the same
// level and version.
func (p *Plugin) auditViolations(ctx context.Context, pol Policy, podMeta *metav1.ObjectMeta, spec *corev1.PodSpec, enforced *Verdict) {
	var v Verdict
	if enforced != nil && pol.Audit == pol.Enforce {
		v = *enforced
	} else {
		v = p.eval.Evaluate(pol.Audit, podMeta, spec)
	}
	if !v.Allowed {
		annotate(ctx, auditViolationsKey, fmt.Sprintf("would violate PodSecurity %q: %s", pol.Audit.String(), v.Detail()))
	}
}
