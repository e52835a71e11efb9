package daemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// templateGenerationLabel is the pre-ControllerRevision way a daemon pod
// was tied to a template; still honoured so such pods count as updated.
const templateGenerationLabel = "pod-template-generation"

func podReady(pod *corev1.Pod) bool {
	return readyCondition(pod) != nil
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// podAvailable is ready for at least minReadySeconds.
func podAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := readyCondition(pod)
	if c == nil {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(time.Duration(minReadySeconds)*time.Second).Before(now)
}

func podTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// templateGeneration reads the generation the API server once stamped on
// daemon sets, if this one carries it.
func templateGeneration(ds *appsv1.DaemonSet) (int64, bool) {
	v, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	if !ok {
		return 0, false
	}
	var g int64
	if _, err := fmt.Sscan(v, &g); err != nil {
		return 0, false
	}
	return g, true
}

// podUpdated says whether pod runs the template of revision hash.
func podUpdated(ds *appsv1.DaemonSet, pod *corev1.Pod, hash string) bool {
	if hash != "" && pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
		return true
	}
	g, ok := templateGeneration(ds)
	return ok && pod.Labels[templateGenerationLabel] == fmt.Sprint(g)
}

// podTemplate is the template daemon pods of revision hash are made from.
func podTemplate(ds *appsv1.DaemonSet, hash string) corev1.PodTemplateSpec {
	t := *ds.Spec.Template.DeepCopy()
	addDaemonTolerations(&t.Spec)
	t.Labels = maps.Clone(t.Labels)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if g, ok := templateGeneration(ds); ok {
		t.Labels[templateGenerationLabel] = fmt.Sprint(g)
	}
	if hash != "" {
		t.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	}
	return t
}

// newDaemonPod is the pod for nodeName, left for the scheduler to bind.
func newDaemonPod(ds *appsv1.DaemonSet, t *corev1.PodTemplateSpec, nodeName string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ds.Name + "-",
			Namespace:       ds.Namespace,
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      append([]string(nil), t.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	pod.Spec.Affinity = pinToNode(pod.Spec.Affinity, nodeName)
	return pod
}

// claimPods returns the pods ds controls, adopting matching orphans and
// releasing owned pods that no longer match its selector, as upstream's
// controller-ref manager does.
func (c *controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of daemon set %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	all, err := c.pods.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, pod := range all {
		ref := metav1.GetControllerOf(pod)
		matches := selector.Matches(labels.Set(pod.Labels))
		switch {
		case ref != nil && ref.UID != ds.UID:
		case ref != nil && matches:
			out = append(out, pod)
		case ref != nil:
			if ds.DeletionTimestamp == nil {
				if err := c.patchOwner(ctx, pod, ds, false); err != nil {
					return nil, err
				}
			}
		case matches && pod.DeletionTimestamp == nil && ds.DeletionTimestamp == nil:
			if err := c.patchOwner(ctx, pod, ds, true); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			out = append(out, pod)
		}
	}
	return out, nil
}

// patchOwner adopts (or releases) pod. The pod's UID in the patch makes it
// fail rather than touch a different pod of the same name.
func (c *controller) patchOwner(ctx context.Context, pod *corev1.Pod, ds *appsv1.DaemonSet, adopt bool) error {
	var ref any = map[string]any{"$patch": "delete", "uid": ds.UID}
	if adopt {
		ref = metav1.NewControllerRef(ds, controllerKind)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []any{ref}, "uid": pod.UID}})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !(apierrors.IsNotFound(err) && !adopt) {
		return fmt.Errorf("patch owner of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// nodesToPods groups ds's pods by the node they are for. Terminal pods that
// are being deleted are gone for all purposes but history, which must not
// lose the revision they still name.
func (c *controller) nodesToPods(ctx context.Context, ds *appsv1.DaemonSet, withDeletedTerminal bool) (map[string][]*corev1.Pod, error) {
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	out := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if !withDeletedTerminal && podTerminal(pod) && pod.DeletionTimestamp != nil {
			continue
		}
		if node, ok := targetNode(pod); ok {
			out[node] = append(out[node], pod)
		}
	}
	return out, nil
}

// olderFirst orders pods on one node, the one to keep first: scheduled
// pods before pending ones, then the oldest.
func olderFirst(a, b *corev1.Pod) int {
	if sa, sb := a.Spec.NodeName != "", b.Spec.NodeName != ""; sa != sb {
		if sa {
			return -1
		}
		return 1
	}
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
