package podsecurity

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"skiff/server/apiserver"
)

const (
	// A namespace update checks at most this many existing pods, for at
	// most this long (or half the request's remaining time): the warnings
	// are advice and must not make the update slow.
	namespaceMaxPodsToCheck  = 3000
	namespacePodCheckTimeout = time.Second
)

var namespaceKind = schema.GroupKind{Kind: "Namespace"}

// admitNamespace refuses bad pod-security labels (422; on update only when
// they changed, so an old namespace stays editable) and warns about the
// existing pods a tightened enforce level would refuse.
func (p *Plugin) admitNamespace(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Subresource != "" {
		return nil
	}
	ns, ok := a.Object.(*corev1.Namespace)
	if !ok {
		return apierrors.NewBadRequest("failed to decode namespace")
	}
	newPolicy, newErrs := PolicyFromLabels(ns.Labels, p.defaults)
	if a.Op == apiserver.OpCreate {
		if len(newErrs) > 0 {
			return apierrors.NewInvalid(namespaceKind, ns.Name, newErrs)
		}
		if p.exemptNamespace(ns.Name) {
			p.warnExempt(ctx, ns, newPolicy)
		}
		return nil
	}
	old, ok := a.Old.(*corev1.Namespace)
	if !ok {
		return apierrors.NewBadRequest("failed to decode old namespace")
	}
	oldPolicy, oldErrs := PolicyFromLabels(old.Labels, p.defaults)
	if len(newErrs) > 0 && (len(oldErrs) == 0 || !reflect.DeepEqual(newErrs, oldErrs)) {
		return apierrors.NewInvalid(namespaceKind, ns.Name, newErrs)
	}
	switch {
	case newPolicy.Enforce == oldPolicy.Enforce,
		newPolicy.Enforce.Level == LevelPrivileged,
		// relaxed at the same version: nothing newly refused
		newPolicy.Enforce.Version == oldPolicy.Enforce.Version && CompareLevels(newPolicy.Enforce.Level, oldPolicy.Enforce.Level) < 1:
		return nil
	}
	if p.exemptNamespace(ns.Name) {
		p.warnExempt(ctx, ns, newPolicy)
		return nil
	}
	p.warn(ctx, p.checkExistingPods(ctx, ns.Name, newPolicy.Enforce)...)
	return nil
}

// warnExempt tells who labels an exempt namespace that the labels do
// nothing (unless they ask for nothing or for the defaults).
func (p *Plugin) warnExempt(ctx context.Context, ns *corev1.Namespace, pol Policy) {
	if pol.fullyPrivileged() || pol.equivalent(p.defaults) {
		return
	}
	var modes []string
	for _, m := range []struct {
		name                 string
		lv                   LevelVersion
		levelKey, versionKey string
	}{
		{"enforce", pol.Enforce, EnforceLevelLabel, EnforceVersionLabel},
		{"audit", pol.Audit, AuditLevelLabel, AuditVersionLabel},
		{"warn", pol.Warn, WarnLevelLabel, WarnVersionLabel},
	} {
		_, hasLevel := ns.Labels[m.levelKey]
		_, hasVersion := ns.Labels[m.versionKey]
		if m.lv.Level != LevelPrivileged && (hasLevel || hasVersion) {
			modes = append(modes, m.name+"="+m.lv.String())
		}
	}
	p.warn(ctx, fmt.Sprintf("namespace %q is exempt from Pod Security, and the policy (%s) will be ignored", ns.Name, strings.Join(modes, ", ")))
}

// podGroup counts the pods sharing one set of violations.
type podGroup struct {
	first string // lexically first pod name
	count int
}

// checkExistingPods is upstream's EvaluatePodsInNamespace: one warning per
// distinct set of violations, naming its first pod and how many others.
func (p *Plugin) checkExistingPods(ctx context.Context, namespace string, enforce LevelVersion) []string {
	timeout := namespacePodCheckTimeout
	if deadline, ok := ctx.Deadline(); ok {
		if half := time.Until(deadline) / 2; half < timeout {
			timeout = half
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pods, err := p.pods.ListPods(ctx, namespace)
	if err != nil {
		return []string{"failed to list pods while checking new PodSecurity enforce level"}
	}
	pods = p.prioritizePods(pods)
	total := len(pods)
	if len(pods) > p.maxPods {
		pods = pods[:p.maxPods]
	}
	checked := len(pods)
	var reasons []string
	groups := map[string]podGroup{}
	for i, pod := range pods {
		if v := p.eval.Evaluate(enforce, &pod.ObjectMeta, &pod.Spec); !v.Allowed {
			reason := v.Reason()
			g, seen := groups[reason]
			if !seen {
				g.first = pod.Name
				reasons = append(reasons, reason)
			} else if pod.Name < g.first {
				g.first = pod.Name
			}
			g.count++
			groups[reason] = g
		}
		if ctx.Err() != nil {
			checked = i + 1
			break
		}
	}
	var warnings []string
	if checked < total {
		warnings = append(warnings, fmt.Sprintf("new PodSecurity enforce level only checked against the first %d of %d existing pods", checked, total))
	}
	if len(reasons) > 0 {
		warnings = append(warnings, fmt.Sprintf("existing pods in namespace %q violate the new PodSecurity enforce level %q", namespace, enforce.String()))
	}
	for i, r := range reasons {
		switch g := groups[r]; g.count {
		case 1:
			reasons[i] = fmt.Sprintf("%s: %s", g.first, r)
		case 2:
			reasons[i] = fmt.Sprintf("%s (and 1 other pod): %s", g.first, r)
		default:
			reasons[i] = fmt.Sprintf("%s (and %d other pods): %s", g.first, g.count-1, r)
		}
	}
	sort.Strings(reasons)
	return append(warnings, reasons...)
}

// prioritizePods drops pods of exempt runtime classes and puts one pod per
// controller first, so the pod limit covers as many distinct templates as
// it can.
func (p *Plugin) prioritizePods(pods []*corev1.Pod) []*corev1.Pod {
	var first, rest []*corev1.Pod
	seen := map[types.UID]bool{}
	for _, pod := range pods {
		if p.exemptRuntimeClass(pod.Spec.RuntimeClassName) {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(pod)
		switch {
		case ref == nil:
			first = append(first, pod)
		case seen[ref.UID]:
			rest = append(rest, pod)
		default:
			seen[ref.UID] = true
			first = append(first, pod)
		}
	}
	return append(first, rest...)
}
