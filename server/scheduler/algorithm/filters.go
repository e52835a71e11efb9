package algorithm

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The reasons, worded as upstream words them: users search for these.
const (
	ReasonUnschedulable     = "node(s) were unschedulable"
	ReasonNodeName          = "node(s) didn't match the requested node name"
	ReasonNodeAffinity      = "node(s) didn't match Pod's node affinity/selector"
	ReasonAffinityConflict  = "pod affinity terms conflict"
	ReasonNodePorts         = "node(s) didn't have free ports for the requested pod ports"
	ReasonTooManyPods       = "Too many pods"
	ReasonSpreadMissing     = "node(s) didn't match pod topology spread constraints (missing required label)"
	ReasonSpreadSkew        = "node(s) didn't match pod topology spread constraints"
	ReasonPodAffinity       = "node(s) didn't match pod affinity rules"
	ReasonPodAntiAffinity   = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingAntiAff   = "node(s) didn't satisfy existing pods anti-affinity rules"
	ReasonNotHelpful        = "Preemption is not helpful for scheduling"
	ReasonNoVictims         = "No preemption victims found for incoming pod"
	ReasonNotEligibleNever  = "not eligible due to preemptionPolicy=Never."
	ReasonNotEligibleWaiter = "not eligible due to a terminating pod on the nominated node."
	taintUnschedulable      = "node.kubernetes.io/unschedulable"
)

// Statuses without per-node detail are shared rather than allocated for
// each of thousands of nodes.
var (
	statusUnschedulable   = newStatus(UnschedulableAndUnresolvable, NodeUnschedulable, ReasonUnschedulable)
	statusNodeName        = newStatus(UnschedulableAndUnresolvable, NodeName, ReasonNodeName)
	statusNodeAffinity    = newStatus(UnschedulableAndUnresolvable, NodeAffinity, ReasonNodeAffinity)
	statusNodePorts       = newStatus(Unschedulable, NodePorts, ReasonNodePorts)
	statusSpreadMissing   = newStatus(UnschedulableAndUnresolvable, PodTopologySpread, ReasonSpreadMissing)
	statusSpreadSkew      = newStatus(Unschedulable, PodTopologySpread, ReasonSpreadSkew)
	statusPodAffinity     = newStatus(UnschedulableAndUnresolvable, InterPodAffinity, ReasonPodAffinity)
	statusPodAntiAffinity = newStatus(Unschedulable, InterPodAffinity, ReasonPodAntiAffinity)
	statusExistingAntiAff = newStatus(Unschedulable, InterPodAffinity, ReasonExistingAntiAff)
)

type filterFunc func(c *cycle, n *NodeInfo) *Status

var filterFuncs = map[string]filterFunc{
	NodeUnschedulable: filterNodeUnschedulable,
	NodeName:          filterNodeName,
	TaintToleration:   filterTaints,
	NodeAffinity:      filterNodeAffinity,
	NodePorts:         filterNodePorts,
	NodeResourcesFit:  filterFit,
	PodTopologySpread: filterSpread,
	InterPodAffinity:  filterInterPodAffinity,
}

func filterNodeUnschedulable(c *cycle, n *NodeInfo) *Status {
	if !n.Node.Spec.Unschedulable {
		return nil
	}
	if tolerates(c.pi.Pod.Spec.Tolerations, &v1.Taint{Key: taintUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
		return nil
	}
	return statusUnschedulable
}

func filterNodeName(c *cycle, n *NodeInfo) *Status {
	if want := c.pi.Pod.Spec.NodeName; want != "" && want != n.Node.Name {
		return statusNodeName
	}
	return nil
}

func filterTaints(c *cycle, n *NodeInfo) *Status {
	t, bad := untoleratedTaint(n.Node.Spec.Taints, c.pi.Pod.Spec.Tolerations, v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute)
	if !bad {
		return nil
	}
	return newStatus(UnschedulableAndUnresolvable, TaintToleration, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value))
}

func filterNodeAffinity(c *cycle, n *NodeInfo) *Status {
	if c.nodeAffinity.matches(n.Node) {
		return nil
	}
	return statusNodeAffinity
}

func filterNodePorts(c *cycle, n *NodeInfo) *Status {
	if len(c.pi.HostPorts) == 0 || len(n.UsedPorts) == 0 {
		return nil
	}
	for _, want := range c.pi.HostPorts {
		if portConflict(n.UsedPorts, want) {
			return statusNodePorts
		}
	}
	return nil
}

// portConflict: a wildcard IP conflicts with any IP on the same protocol
// and port, a specific IP with itself and the wildcard.
func portConflict(used map[HostPort]int, want HostPort) bool {
	if want.IP == "0.0.0.0" {
		for u := range used {
			if u.Port == want.Port && u.Protocol == want.Protocol {
				return true
			}
		}
		return false
	}
	if used[want] > 0 {
		return true
	}
	return used[HostPort{IP: "0.0.0.0", Protocol: want.Protocol, Port: want.Port}] > 0
}

// InsufficientResource describes one resource a node lacks for the pod.
type InsufficientResource struct {
	Name      v1.ResourceName
	Reason    string
	Requested int64
	Used      int64
	Capacity  int64
	// Unresolvable: the node could not take the pod even empty, so
	// preemption cannot help.
	Unresolvable bool
}

func filterFit(c *cycle, n *NodeInfo) *Status {
	ins := Fits(&c.pi.Requests, n, c.alg.ignored)
	if len(ins) == 0 {
		return nil
	}
	code := Unschedulable
	reasons := make([]string, len(ins))
	for i, r := range ins {
		reasons[i] = r.Reason
		if r.Unresolvable {
			code = UnschedulableAndUnresolvable
		}
	}
	return newStatus(code, NodeResourcesFit, reasons...)
}

// ignoredResources are extended resources the fit filter leaves to
// someone else (NodeResourcesFit's ignoredResources and
// ignoredResourceGroups).
type ignoredResources struct {
	names  map[string]bool
	groups map[string]bool
}

func (ig ignoredResources) has(name v1.ResourceName) bool {
	if !strings.Contains(string(name), "/") || strings.HasPrefix(string(name), "kubernetes.io/") {
		return false
	}
	group, _, _ := strings.Cut(string(name), "/")
	return ig.names[string(name)] || ig.groups[group]
}

// Fits lists what node lacks for a pod requesting req.
func Fits(req *Resource, n *NodeInfo, ig ignoredResources) []InsufficientResource {
	var out []InsufficientResource
	if len(n.Pods)+1 > n.Allocatable.AllowedPodNumber {
		out = append(out, InsufficientResource{Name: v1.ResourcePods, Reason: ReasonTooManyPods, Requested: 1, Used: int64(len(n.Pods)), Capacity: int64(n.Allocatable.AllowedPodNumber), Unresolvable: n.Allocatable.AllowedPodNumber < 1})
	}
	if req.IsZero() {
		return out
	}
	check := func(name v1.ResourceName, reason string, want, used, capacity int64) {
		if want > 0 && want > capacity-used {
			out = append(out, InsufficientResource{Name: name, Reason: reason, Requested: want, Used: used, Capacity: capacity, Unresolvable: want > capacity})
		}
	}
	check(v1.ResourceCPU, "Insufficient cpu", req.MilliCPU, n.Requested.MilliCPU, n.Allocatable.MilliCPU)
	check(v1.ResourceMemory, "Insufficient memory", req.Memory, n.Requested.Memory, n.Allocatable.Memory)
	check(v1.ResourceEphemeralStorage, "Insufficient ephemeral-storage", req.EphemeralStorage, n.Requested.EphemeralStorage, n.Allocatable.EphemeralStorage)
	for name, want := range req.Scalar {
		if want == 0 || ig.has(name) {
			continue
		}
		check(name, "Insufficient "+string(name), want, n.Requested.Scalar[name], n.Allocatable.Scalar[name])
	}
	return out
}
