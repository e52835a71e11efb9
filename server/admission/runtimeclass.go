package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/apiserver"
)

// RuntimeClassGetter reads RuntimeClasses.
type RuntimeClassGetter interface {
	// RuntimeClass returns the named class, nil when there is none. A miss
	// in a cache must be confirmed against the store: a class created a
	// moment ago exists.
	RuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error)
}

// RuntimeClass is upstream's RuntimeClass plugin: a new pod naming a class
// that does not exist is refused (403), the class's overhead becomes the
// pod's spec.overhead (a pod asking for another overhead, or for one no
// class defines, is refused), and its scheduling constraints are merged
// into the pod's node selector and tolerations.
type RuntimeClass struct{ Get RuntimeClassGetter }

// Admit implements apiserver.Admitter.
func (p RuntimeClass) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	pod, ok := newPod(a)
	if !ok {
		return nil
	}
	forbidden := func(format string, args ...any) error {
		return apierrors.NewForbidden(a.Resource.GVR().GroupResource(), pod.Name, fmt.Errorf(format, args...))
	}
	var rc *nodev1.RuntimeClass
	if name := pod.Spec.RuntimeClassName; name != nil {
		var err error
		if rc, err = p.Get.RuntimeClass(ctx, *name); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("runtimeclass %q: %w", *name, err))
		}
		if rc == nil {
			return forbidden("pod rejected: RuntimeClass %q not found", *name)
		}
	}
	if rc == nil || rc.Overhead == nil {
		if pod.Spec.Overhead != nil {
			return forbidden("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")
		}
	} else {
		if len(pod.Spec.Overhead) > 0 && !equality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return forbidden("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if rc == nil || rc.Scheduling == nil {
		return nil
	}
	selector := pod.Spec.NodeSelector
	for key, want := range rc.Scheduling.NodeSelector {
		if got, ok := selector[key]; ok && got != want {
			return forbidden("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", key, want, key, got)
		}
		if selector == nil {
			selector = map[string]string{}
		}
		selector[key] = want
	}
	pod.Spec.NodeSelector = selector
	pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, rc.Scheduling.Tolerations)
	return nil
}

// mergeTolerations is upstream's MergeTolerations: both lists, without the
// tolerations another one already covers (the first of equal ones kept).
func mergeTolerations(first, second []corev1.Toleration) []corev1.Toleration {
	all := append(append([]corev1.Toleration(nil), first...), second...)
	var merged []corev1.Toleration
next:
	for i, t := range all {
		for _, m := range merged {
			if tolerationCovers(m, t) {
				continue next
			}
		}
		for _, later := range all[i+1:] {
			if !equality.Semantic.DeepEqual(t, later) && tolerationCovers(later, t) {
				continue next
			}
		}
		merged = append(merged, t)
	}
	return merged
}

// tolerationCovers reports whether ss tolerates everything t does.
func tolerationCovers(ss, t corev1.Toleration) bool {
	if equality.Semantic.DeepEqual(t, ss) {
		return true
	}
	if t.Key != ss.Key && (ss.Key != "" || ss.Operator != corev1.TolerationOpExists) {
		return false
	}
	if t.Effect != ss.Effect && ss.Effect != "" {
		return false
	}
	if ss.Effect == corev1.TaintEffectNoExecute && ss.TolerationSeconds != nil {
		if t.TolerationSeconds == nil || *t.TolerationSeconds > *ss.TolerationSeconds {
			return false
		}
	}
	switch ss.Operator {
	case corev1.TolerationOpEqual, "":
		return t.Operator == corev1.TolerationOpEqual && t.Value == ss.Value
	case corev1.TolerationOpExists:
		return true
	}
	return false
}
