package nodelifecycle

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

type zoneState string

const (
	stateNormal  zoneState = "Normal"
	statePartial zoneState = "PartialDisruption"
	stateFull    zoneState = "FullDisruption"
)

// zoneOf is the failure domain a node is in: nodes without zone labels
// form one zone together.
func zoneOf(node *corev1.Node) string {
	get := func(stable, beta string) string {
		if v := node.Labels[stable]; v != "" {
			return v
		}
		return node.Labels[beta]
	}
	region := get(corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaRegion)
	zone := get(corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone)
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// computeZoneState is upstream's: no Ready node at all is a full
// disruption; more than two not-Ready nodes making at least threshold of
// the zone is a partial one.
func computeZoneState(ready, notReady int, threshold float64) zoneState {
	switch {
	case ready == 0 && notReady > 0:
		return stateFull
	case notReady > 2 && float64(notReady)/float64(ready+notReady) >= threshold:
		return statePartial
	default:
		return stateNormal
	}
}

// zoneLimiter lets a zone have a node NoExecute-tainted at most qps times
// a second, with a burst of one, so that a failing zone loses its pods
// gradually rather than all at once.
type zoneLimiter struct {
	last time.Time
	used bool
}

func (l *zoneLimiter) tryAccept(now time.Time, qps float64) bool {
	switch {
	case qps < 0:
		return true
	case qps == 0:
		return false
	}
	if l.used && now.Sub(l.last) < time.Duration(float64(time.Second)/qps) {
		return false
	}
	l.last, l.used = now, true
	return true
}

func (c *controller) zoneQPS(state zoneState, size int) float64 {
	if state == statePartial {
		if size > c.cfg.LargeClusterSizeThreshold {
			return c.cfg.SecondaryEvictionLimiterQPS
		}
		return 0
	}
	return c.cfg.EvictionLimiterQPS
}

// noExecuteVerdict says which of our NoExecute taints a node should carry
// given its Ready status and the one it carries (or was last given); ok is
// false when the node's taints are to be left as they are. Swapping one
// taint for the other is immediate; tainting a node that had neither takes
// a token from its zone's limiter.
func noExecuteVerdict(ready corev1.ConditionStatus, current string, fullDisruption bool, allow func() bool) (string, bool) {
	if fullDisruption || ready == corev1.ConditionTrue {
		return "", true
	}
	var want string
	switch ready {
	case corev1.ConditionFalse:
		want = corev1.TaintNodeNotReady
	case corev1.ConditionUnknown:
		want = corev1.TaintNodeUnreachable
	default:
		return "", false
	}
	if current != "" || allow() {
		return want, true
	}
	return "", false
}

// decideNoExecute gives each node its NoExecute verdict, given the zone
// states and whether the whole cluster is down.
func (c *controller) decideNoExecute(nodes []*corev1.Node, now time.Time) {
	m := &c.monitor
	states, sizes, all := c.judgeZones(nodes, now)
	// Nodes longest not Ready go first when the limiter is short.
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b *corev1.Node) int {
		return cmp.Or(readySince(a).Compare(readySince(b)), cmp.Compare(a.Name, b.Name))
	})
	for _, n := range sorted {
		z := zoneOf(n)
		allow := func() bool {
			if m.zones[z] == nil {
				m.zones[z] = &zoneLimiter{}
			}
			return m.zones[z].tryAccept(now, c.zoneQPS(states[z], sizes[z]))
		}
		want, ok := noExecuteVerdict(readyStatus(n), c.currentNoExecute(n), all, allow)
		if !ok {
			continue
		}
		c.mu.Lock()
		old, had := c.noExecute[n.Name]
		c.noExecute[n.Name] = want
		c.mu.Unlock()
		if !had || old != want {
			c.taintQ.Add(n.Name)
		}
	}
}

// judgeZones works out each zone's state and size, and enters or leaves
// full disruption: no Ready node anywhere.
func (c *controller) judgeZones(nodes []*corev1.Node, now time.Time) (map[string]zoneState, map[string]int, bool) {
	m := &c.monitor
	ready, notReady := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		if readyStatus(n) == corev1.ConditionTrue {
			ready[zoneOf(n)]++
		} else {
			notReady[zoneOf(n)]++
		}
	}
	states, sizes := map[string]zoneState{}, map[string]int{}
	all := len(nodes) > 0
	for _, n := range nodes {
		z := zoneOf(n)
		if _, done := states[z]; done {
			continue
		}
		states[z], sizes[z] = computeZoneState(ready[z], notReady[z], c.cfg.UnhealthyZoneThreshold), ready[z]+notReady[z]
		all = all && states[z] == stateFull
		if old, ok := m.states[z]; ok && old != states[z] || !ok && states[z] != stateNormal {
			c.log.Info("zone state changed", "zone", z, "state", states[z], "ready", ready[z], "notReady", notReady[z])
		}
	}
	m.states = states
	for z := range m.zones {
		if _, ok := states[z]; !ok {
			delete(m.zones, z)
		}
	}
	switch {
	case all && !m.disrupted:
		c.log.Warn("all nodes are not ready: entering full disruption mode; NoExecute taints are lifted and no pod is evicted until a node is Ready again, as the fault is more likely this host's than every node's", "nodes", len(nodes))
	case !all && m.disrupted:
		c.log.Info("some nodes are ready again: leaving full disruption mode")
		// Nodes get a fresh grace period: their kubelets may only now be
		// reaching us again.
		for _, h := range m.health {
			h.probe = now
		}
	}
	m.disrupted = all
	return states, sizes, all
}

func readySince(n *corev1.Node) time.Time {
	if c := condition(&n.Status, corev1.NodeReady); c != nil {
		return c.LastTransitionTime.Time
	}
	return n.CreationTimestamp.Time
}

// currentNoExecute is the NoExecute taint of ours a node carries or was
// last given and may not carry yet.
func (c *controller) currentNoExecute(n *corev1.Node) string {
	c.mu.Lock()
	v, ok := c.noExecute[n.Name]
	c.mu.Unlock()
	if ok {
		return v
	}
	for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		if hasTaint(n.Spec.Taints, key, corev1.TaintEffectNoExecute) {
			return key
		}
	}
	return ""
}
