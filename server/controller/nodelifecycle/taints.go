package nodelifecycle

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// conditionTaints are upstream's NoSchedule taints for node conditions.
var conditionTaints = []struct {
	cond   corev1.NodeConditionType
	status corev1.ConditionStatus
	key    string
}{
	{corev1.NodeReady, corev1.ConditionFalse, corev1.TaintNodeNotReady},
	{corev1.NodeReady, corev1.ConditionUnknown, corev1.TaintNodeUnreachable},
	{corev1.NodeMemoryPressure, corev1.ConditionTrue, corev1.TaintNodeMemoryPressure},
	{corev1.NodeDiskPressure, corev1.ConditionTrue, corev1.TaintNodeDiskPressure},
	{corev1.NodeNetworkUnavailable, corev1.ConditionTrue, corev1.TaintNodeNetworkUnavailable},
	{corev1.NodePIDPressure, corev1.ConditionTrue, corev1.TaintNodePIDPressure},
}

// owned reports whether this controller manages the taint: by key and
// effect, whatever its value, as upstream matches them.
func owned(t corev1.Taint) bool {
	switch t.Effect {
	case corev1.TaintEffectNoExecute:
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	case corev1.TaintEffectNoSchedule:
		if t.Key == corev1.TaintNodeUnschedulable {
			return true
		}
		for _, ct := range conditionTaints {
			if ct.key == t.Key {
				return true
			}
		}
	}
	return false
}

func hasTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	for _, t := range taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

func noExecuteTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

func sameTaints(a, b []corev1.Taint) bool {
	return len(a) == 0 && len(b) == 0 || equality.Semantic.DeepEqual(a, b)
}

// desiredTaints is the node's taint list with ours made to match its
// conditions and spec.unschedulable, and its NoExecute taint set to
// noExecute ("" for none) when decided, or left as it is when not. Taints
// of others are kept as they are, in place; new ones go at the end, the
// NoExecute ones stamped with now, which tolerationSeconds count from.
func desiredTaints(node *corev1.Node, noExecute string, decided bool, now metav1.Time) []corev1.Taint {
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	var want []keyEffect
	neverReported := condition(&node.Status, corev1.NodeReady) == nil
	for _, ct := range conditionTaints {
		if ct.cond == corev1.NodeReady && neverReported {
			// A node that never posted Ready keeps what it was created
			// with (admission gives new nodes not-ready:NoSchedule).
			if hasTaint(node.Spec.Taints, ct.key, corev1.TaintEffectNoSchedule) {
				want = append(want, keyEffect{ct.key, corev1.TaintEffectNoSchedule})
			}
			continue
		}
		if c := condition(&node.Status, ct.cond); c != nil && c.Status == ct.status {
			want = append(want, keyEffect{ct.key, corev1.TaintEffectNoSchedule})
		}
	}
	if node.Spec.Unschedulable {
		want = append(want, keyEffect{corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule})
	}
	switch {
	case decided && noExecute != "":
		want = append(want, keyEffect{noExecute, corev1.TaintEffectNoExecute})
	case !decided:
		for _, t := range node.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoExecute && owned(t) {
				want = append(want, keyEffect{t.Key, t.Effect})
			}
		}
	}
	wanted := make(map[keyEffect]bool, len(want))
	for _, w := range want {
		wanted[w] = true
	}
	out := make([]corev1.Taint, 0, len(node.Spec.Taints)+len(want))
	for _, t := range node.Spec.Taints {
		ke := keyEffect{t.Key, t.Effect}
		if !owned(t) || wanted[ke] {
			out = append(out, t)
			delete(wanted, ke)
		}
	}
	for _, w := range want {
		if !wanted[w] {
			continue
		}
		t := corev1.Taint{Key: w.key, Effect: w.effect}
		if w.effect == corev1.TaintEffectNoExecute {
			t.TimeAdded = now.DeepCopy()
		}
		out = append(out, t)
	}
	return out
}

// syncTaints brings one node's taints in line with desiredTaints,
// re-reading the node when someone else wrote it in between.
func (c *controller) syncTaints(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	c.mu.Lock()
	noExec, decided := c.noExecute[name]
	c.mu.Unlock()
	fresh := false
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if fresh {
			n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node = n
		}
		fresh = true
		want := desiredTaints(node, noExec, decided, metav1.NewTime(c.clock.Now()))
		if sameTaints(want, node.Spec.Taints) {
			return nil
		}
		updated := node.DeepCopy()
		updated.Spec.Taints = want
		if _, err := c.client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.log.Info("node taints updated", "node", name, "from", taintString(node.Spec.Taints), "to", taintString(want))
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update taints of node %s: %w", name, err)
	}
	return nil
}

func taintString(taints []corev1.Taint) string {
	s := make([]string, len(taints))
	for i, t := range taints {
		s[i] = t.ToString()
	}
	return strings.Join(s, ",")
}
