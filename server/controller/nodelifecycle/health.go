package nodelifecycle

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// health is what the monitor remembers of one node between passes.
type health struct {
	// probe is when a heartbeat was last seen moving, on our clock: the
	// kubelet's own timestamps only tell whether it is still writing.
	probe     time.Time
	heartbeat *metav1.Time
	renew     *metav1.MicroTime
	// ready is the Ready status the last pass left ("" before the first).
	ready corev1.ConditionStatus
}

type monitorState struct {
	health map[string]*health
	zones  map[string]*zoneLimiter
	states map[string]zoneState
	// retry holds nodes whose pods could not all be marked not ready.
	retry map[string]bool
	// disrupted is whether no node at all was Ready in the last pass.
	disrupted bool
}

// conditionsToJudge are the kubelet-owned conditions that become Unknown
// when it goes silent. NetworkUnavailable is left alone: the network
// plugin, not the kubelet, posts it.
var conditionsToJudge = []corev1.NodeConditionType{
	corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

func condition(status *corev1.NodeStatus, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	if c := condition(&node.Status, corev1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}

// observe records the node's heartbeats in h (a new record when nil) and
// moves h.probe to now when the Ready heartbeat or the lease renewal
// changed since last seen. A node first seen counts as just heard from.
func observe(h *health, node *corev1.Node, lease *coordv1.Lease, now time.Time) *health {
	var heartbeat *metav1.Time
	if c := condition(&node.Status, corev1.NodeReady); c != nil {
		heartbeat = c.LastHeartbeatTime.DeepCopy()
	}
	var renew *metav1.MicroTime
	if lease != nil && lease.Spec.RenewTime != nil {
		renew = lease.Spec.RenewTime.DeepCopy()
	}
	if h == nil {
		return &health{probe: now, heartbeat: heartbeat, renew: renew}
	}
	if (heartbeat == nil) != (h.heartbeat == nil) || heartbeat != nil && !heartbeat.Equal(h.heartbeat) {
		h.probe, h.heartbeat = now, heartbeat
	}
	// A lease that went away is no news; only a renewal is.
	if renew != nil && (h.renew == nil || !renew.Equal(h.renew)) {
		h.probe, h.renew = now, renew
	}
	return h
}

// silent reports whether a node has been quiet longer than it may be: the
// startup grace while it never posted a Ready condition, else the monitor
// grace.
func silent(node *corev1.Node, h *health, now time.Time, startupGrace, grace time.Duration) bool {
	if condition(&node.Status, corev1.NodeReady) == nil {
		grace = startupGrace
	}
	return now.Sub(h.probe) > grace
}

// markUnknown turns the kubelet-owned conditions of a silent node Unknown,
// adding those it never posted, and reports whether anything changed.
func markUnknown(status *corev1.NodeStatus, created, now metav1.Time) bool {
	changed := false
	for _, t := range conditionsToJudge {
		c := condition(status, t)
		switch {
		case c == nil:
			status.Conditions = append(status.Conditions, corev1.NodeCondition{
				Type: t, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.",
				LastHeartbeatTime: created, LastTransitionTime: now,
			})
			changed = true
		case c.Status != corev1.ConditionUnknown:
			c.Status = corev1.ConditionUnknown
			c.Reason = "NodeStatusUnknown"
			c.Message = "Kubelet stopped posting node status."
			c.LastTransitionTime = now
			changed = true
		}
	}
	return changed
}

func (c *controller) runMonitor(ctx context.Context) {
	t := c.clock.NewTicker(c.cfg.NodeMonitorPeriod)
	defer t.Stop()
	for {
		c.monitorOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// monitorOnce judges every node, then decides, zone by zone, which of them
// are to carry NoExecute taints.
func (c *controller) monitorOnce(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Warn("list nodes", "err", err)
		return
	}
	now := c.clock.Now()
	seen := make(map[string]bool, len(nodes))
	judged := make([]*corev1.Node, 0, len(nodes))
	for _, node := range nodes {
		if ctx.Err() != nil {
			return
		}
		seen[node.Name] = true
		judged = append(judged, c.checkNode(ctx, node, now))
	}
	for name := range c.monitor.health {
		if !seen[name] {
			c.forgetNode(name)
		}
	}
	c.decideNoExecute(judged, now)
}

// checkNode updates what is known of one node's heartbeats, marks it
// Unknown when it has gone silent, and marks its pods not ready when it
// stops being Ready. It returns the node as it now stands.
func (c *controller) checkNode(ctx context.Context, node *corev1.Node, now time.Time) *corev1.Node {
	m := &c.monitor
	h, known := m.health[node.Name]
	if !known {
		c.nodeEvent(node.Name, corev1.EventTypeNormal, "RegisteredNode", fmt.Sprintf("Registered Node %s in Controller", node.Name))
	}
	lease, err := c.leases.Leases(corev1.NamespaceNodeLease).Get(node.Name)
	if err != nil {
		lease = nil
	}
	h = observe(h, node, lease, now)
	m.health[node.Name] = h
	prev := h.ready
	if silent(node, h, now, c.cfg.NodeStartupGracePeriod, c.cfg.NodeMonitorGracePeriod) {
		updated := node.DeepCopy()
		if markUnknown(&updated.Status, node.CreationTimestamp, metav1.NewTime(now)) {
			got, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
			if err != nil {
				// Judged on the old view this pass; the next one retries.
				c.log.Warn("mark node status unknown", "node", node.Name, "err", err)
			} else {
				c.log.Info("node stopped posting status", "node", node.Name, "silentFor", now.Sub(h.probe).Round(time.Millisecond))
				if readyStatus(node) == corev1.ConditionTrue {
					c.recordStatusChange(node.Name, "NodeNotReady")
				}
				node = got
			}
		}
	}
	cur := readyStatus(node)
	h.ready = cur
	// Once per fall from Ready, as upstream: a kubelet that posts NotReady
	// itself keeps reporting its pods and must not be fought every pass.
	// A node already Unknown when we start is ours to speak for.
	if cur == corev1.ConditionFalse || cur == corev1.ConditionUnknown {
		if prev == corev1.ConditionTrue || m.retry[node.Name] || prev == "" && cur == corev1.ConditionUnknown {
			if err := c.markPodsNotReady(ctx, node.Name); err != nil {
				c.log.Warn("mark pods not ready", "node", node.Name, "err", err)
				m.retry[node.Name] = true
			} else {
				delete(m.retry, node.Name)
			}
		}
	} else {
		delete(m.retry, node.Name)
	}
	return node
}

func (c *controller) forgetNode(name string) {
	m := &c.monitor
	delete(m.health, name)
	delete(m.retry, name)
	c.mu.Lock()
	delete(c.noExecute, name)
	c.mu.Unlock()
	c.nodeEvent(name, corev1.EventTypeNormal, "RemovingNode", fmt.Sprintf("Removing Node %s from Controller", name))
}

// nodeRef names a node as the kubelet does in its events, with the name as
// UID, which is what kubectl describe node looks events up by.
func nodeRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID(name)}
}

func (c *controller) nodeEvent(name, eventType, reason, what string) {
	c.rec.Eventf(nodeRef(name), eventType, reason, "Node %s event: %s", name, what)
}

func (c *controller) recordStatusChange(name, status string) {
	c.rec.Eventf(nodeRef(name), corev1.EventTypeNormal, status, "Node %s status is now: %s", name, status)
}
