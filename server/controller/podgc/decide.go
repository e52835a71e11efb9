package podgc

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// outOfServiceTaint marks a node its operator declared gone for good;
// pods stuck terminating there are force-deleted so their volumes and
// names are released.
const outOfServiceTaint = "node.kubernetes.io/out-of-service"

func isTerminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func isEvicted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted"
}

// byDeletionOrder puts evicted pods first (they are the least likely to
// be wanted by whoever created them), then the oldest, then by name so
// the order is stable.
func byDeletionOrder(a, b *corev1.Pod) int {
	if ea, eb := isEvicted(a), isEvicted(b); ea != eb {
		if ea {
			return -1
		}
		return 1
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// terminatedOverThreshold are the terminated pods to delete so that no
// more than threshold remain.
func terminatedOverThreshold(pods []*corev1.Pod, threshold int) []*corev1.Pod {
	var terminated []*corev1.Pod
	for _, p := range pods {
		if isTerminated(p) {
			terminated = append(terminated, p)
		}
	}
	n := len(terminated) - threshold
	if n <= 0 {
		return nil
	}
	slices.SortFunc(terminated, byDeletionOrder)
	return terminated[:n]
}

// missingNodes are the nodes pods are bound to that the cache does not
// know.
func missingNodes(pods []*corev1.Pod, nodes sets.Set[string]) sets.Set[string] {
	out := sets.New[string]()
	for _, p := range pods {
		if n := p.Spec.NodeName; n != "" && !nodes.Has(n) {
			out.Insert(n)
		}
	}
	return out
}

// onNodes are the pods bound to any of the nodes.
func onNodes(pods []*corev1.Pod, nodes sets.Set[string]) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" && nodes.Has(p.Spec.NodeName) {
			out = append(out, p)
		}
	}
	return out
}

// unscheduledTerminating are pods being deleted that never reached a
// node: no kubelet will ever finish their deletion.
func unscheduledTerminating(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil && p.Spec.NodeName == "" {
			out = append(out, p)
		}
	}
	return out
}

// terminatingOutOfService are pods being deleted on a node that is not
// ready and carries the out-of-service taint: its kubelet is not coming
// back to finish them.
func terminatingOutOfService(pods []*corev1.Pod, nodes map[string]*corev1.Node) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			continue
		}
		n, ok := nodes[p.Spec.NodeName]
		if ok && !isReady(n) && hasTaint(n, outOfServiceTaint) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, byDeletionOrder)
	return out
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// quarantine holds a missing node back for a while before its pods are
// deleted: the node cache may simply lag behind a pod bound to a node
// that just registered, and a node may be deleted and registered again.
type quarantine struct {
	hold  time.Duration
	since map[string]time.Time
}

func newQuarantine(hold time.Duration) *quarantine {
	return &quarantine{hold: hold, since: map[string]time.Time{}}
}

// due notes the nodes missing now, forgets those no longer missing, and
// returns those missing for at least the hold, to be checked against the
// API server.
func (q *quarantine) due(missing sets.Set[string], now time.Time) []string {
	for n := range q.since {
		if !missing.Has(n) {
			delete(q.since, n)
		}
	}
	var out []string
	for n := range missing {
		first, ok := q.since[n]
		if !ok {
			q.since[n] = now
			first = now
		}
		if now.Sub(first) >= q.hold {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// found restarts the quarantine of a node the API server still has.
func (q *quarantine) found(node string) {
	delete(q.since, node)
}
