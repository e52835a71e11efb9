// Package podcondition sets a pod's status conditions the way upstream's
// UpdatePodCondition does, for every part of the server that writes one
// (the scheduler's preemption, the eviction API, the taint manager).
package podcondition

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set puts cond into st, replacing the condition of its type, and reports
// whether anything changed. Its transition time is kept while its status
// stays the same and is now otherwise; a condition equal in status, reason
// and message is left alone, so a repeated write is a no-op.
func Set(st *corev1.PodStatus, cond corev1.PodCondition, now metav1.Time) bool {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return false
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		} else {
			cond.LastTransitionTime = now
		}
		*c = cond
		return true
	}
	cond.LastTransitionTime = now
	st.Conditions = append(st.Conditions, cond)
	return true
}
