package namespace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// conditionTypes are the namespace conditions this controller owns. Each
// is always present on a terminating namespace, False with an "ok" reason
// when nothing is wrong, so that a condition which was True once is
// visibly cleared. Types, reasons and messages are upstream's, since
// kubectl users and tests read them.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

var okReasons = map[corev1.NamespaceConditionType]string{
	corev1.NamespaceDeletionDiscoveryFailure: "ResourcesDiscovered",
	corev1.NamespaceDeletionGVParsingFailure: "ParsedGroupVersions",
	corev1.NamespaceDeletionContentFailure:   "ContentDeleted",
	corev1.NamespaceContentRemaining:         "ContentRemoved",
	corev1.NamespaceFinalizersRemaining:      "ContentRemoved",
}

var okMessages = map[corev1.NamespaceConditionType]string{
	corev1.NamespaceDeletionDiscoveryFailure: "All resources successfully discovered",
	corev1.NamespaceDeletionGVParsingFailure: "All legacy kube types successfully parsed",
	corev1.NamespaceDeletionContentFailure:   "All content successfully deleted, may be waiting on finalization",
	corev1.NamespaceContentRemaining:         "All content successfully removed",
	corev1.NamespaceFinalizersRemaining:      "All content successfully removed",
}

// conditions turns the outcome of a deletion attempt into one condition
// per owned type. Lists in messages are sorted so that an unchanged
// outcome gives an unchanged status and no write.
func (c *content) conditions() []corev1.NamespaceCondition {
	failed := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	set := func(t corev1.NamespaceConditionType, reason, msg string) {
		failed[t] = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg}
	}
	if c.discoveryErr != nil {
		msg := c.discoveryErr.Error()
		var gerr *discovery.ErrGroupDiscoveryFailed
		if errors.As(c.discoveryErr, &gerr) {
			msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(gerr.Groups), c.discoveryErr)
		}
		set(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
	}
	if c.gvErr != nil {
		set(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", c.gvErr.Error())
	}
	if len(c.deleteErrs) > 0 {
		msgs := make([]string, 0, len(c.deleteErrs))
		for _, e := range c.deleteErrs {
			msgs = append(msgs, e.Error())
		}
		sort.Strings(msgs)
		set(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", ")))
	}
	if len(c.remaining) > 0 {
		var parts []string
		for gvr, n := range c.remaining {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
		sort.Strings(parts)
		set(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+strings.Join(parts, ", "))
	}
	if len(c.finalizers) > 0 {
		var parts []string
		for f, n := range c.finalizers {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(parts)
		set(corev1.NamespaceFinalizersRemaining, "SomeFinalizerRemain", "Some finalizers are remaining: "+strings.Join(parts, ", "))
	}
	out := make([]corev1.NamespaceCondition, 0, len(conditionTypes))
	for _, t := range conditionTypes {
		cond, ok := failed[t]
		if !ok {
			cond = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: okReasons[t], Message: okMessages[t]}
		}
		out = append(out, cond)
	}
	return out
}

// mergeConditions writes want into status and reports whether anything
// changed. LastTransitionTime moves only when a condition's status flips,
// which is what the field means.
func mergeConditions(status *corev1.NamespaceStatus, want []corev1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, w := range want {
		i := indexOf(status.Conditions, w.Type)
		if i < 0 {
			w.LastTransitionTime = now
			status.Conditions = append(status.Conditions, w)
			changed = true
			continue
		}
		cur := &status.Conditions[i]
		if cur.Status == w.Status && cur.Reason == w.Reason && cur.Message == w.Message {
			continue
		}
		if cur.Status != w.Status {
			cur.LastTransitionTime = now
		}
		cur.Status, cur.Reason, cur.Message = w.Status, w.Reason, w.Message
		changed = true
	}
	return changed
}

func indexOf(conds []corev1.NamespaceCondition, t corev1.NamespaceConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}
