package algorithm

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// PodInfo is a pod with what the plugins would otherwise recompute for it
// on every node of every cycle: its requests and its parsed affinity terms.
// It is immutable once built.
type PodInfo struct {
	Pod      *v1.Pod
	Priority int32
	// Requests is what the fit filter checks; NonZero what the
	// spreading scores count.
	Requests Resource
	NonZero  Resource

	RequiredAffinity      []AffinityTerm
	RequiredAntiAffinity  []AffinityTerm
	PreferredAffinity     []WeightedAffinityTerm
	PreferredAntiAffinity []WeightedAffinityTerm
	HostPorts             []HostPort
	// ParseErr is a label selector in the pod's terms that does not parse;
	// such a pod is unschedulable rather than matched loosely.
	ParseErr error
}

// AffinityTerm is a parsed pod (anti-)affinity term.
type AffinityTerm struct {
	Namespaces        sets.Set[string]
	Selector          labels.Selector
	TopologyKey       string
	NamespaceSelector labels.Selector
	// selectsNamespaces: the term has a namespaceSelector, so matching
	// needs the candidate pod's namespace labels.
	selectsNamespaces bool
}

// WeightedAffinityTerm is a preferred term.
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// HostPort is one host port a pod binds.
type HostPort struct {
	IP       string
	Protocol v1.Protocol
	Port     int32
}

// Matches reports whether pod (whose namespace has nsLabels) is selected by
// the term.
func (t *AffinityTerm) Matches(pod *v1.Pod, nsLabels labels.Set) bool {
	if !t.Namespaces.Has(pod.Namespace) && !t.NamespaceSelector.Matches(nsLabels) {
		return false
	}
	return t.Selector.Matches(labels.Set(pod.Labels))
}

// NewPodInfo parses pod.
func NewPodInfo(pod *v1.Pod) *PodInfo {
	pi := &PodInfo{Pod: pod, Requests: PodRequests(pod), NonZero: PodNonZeroRequests(pod)}
	if pod.Spec.Priority != nil {
		pi.Priority = *pod.Spec.Priority
	}
	if a := pod.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			pi.RequiredAffinity = pi.terms(pa.RequiredDuringSchedulingIgnoredDuringExecution)
			pi.PreferredAffinity = pi.weightedTerms(pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			pi.RequiredAntiAffinity = pi.terms(pa.RequiredDuringSchedulingIgnoredDuringExecution)
			pi.PreferredAntiAffinity = pi.weightedTerms(pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	pi.HostPorts = podHostPorts(pod)
	return pi
}

// HasAffinity reports whether the pod has any inter-pod (anti-)affinity.
func (pi *PodInfo) HasAffinity() bool {
	return len(pi.RequiredAffinity)+len(pi.RequiredAntiAffinity)+len(pi.PreferredAffinity)+len(pi.PreferredAntiAffinity) > 0
}

func (pi *PodInfo) terms(in []v1.PodAffinityTerm) []AffinityTerm {
	out := make([]AffinityTerm, 0, len(in))
	for i := range in {
		if t, ok := pi.term(&in[i]); ok {
			out = append(out, t)
		}
	}
	return out
}

func (pi *PodInfo) weightedTerms(in []v1.WeightedPodAffinityTerm) []WeightedAffinityTerm {
	out := make([]WeightedAffinityTerm, 0, len(in))
	for i := range in {
		if t, ok := pi.term(&in[i].PodAffinityTerm); ok {
			out = append(out, WeightedAffinityTerm{AffinityTerm: t, Weight: in[i].Weight})
		}
	}
	return out
}

func (pi *PodInfo) term(t *v1.PodAffinityTerm) (AffinityTerm, bool) {
	sel, err := mergedSelector(t.LabelSelector, t.MatchLabelKeys, t.MismatchLabelKeys, pi.Pod.Labels)
	if err != nil {
		pi.ParseErr = err
		return AffinityTerm{}, false
	}
	// A nil namespaceSelector selects no namespace; an empty one all.
	nsSel := labels.Nothing()
	if t.NamespaceSelector != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(t.NamespaceSelector); err != nil {
			pi.ParseErr = err
			return AffinityTerm{}, false
		}
	}
	ns := sets.New(t.Namespaces...)
	if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		ns.Insert(pi.Pod.Namespace)
	}
	return AffinityTerm{Namespaces: ns, Selector: sel, TopologyKey: t.TopologyKey, NamespaceSelector: nsSel, selectsNamespaces: t.NamespaceSelector != nil}, true
}

// mergedSelector is the term's selector with matchLabelKeys (key In the
// pod's value) and mismatchLabelKeys (key NotIn it) added, as upstream does
// when the API server has not merged them already.
func mergedSelector(ls *metav1.LabelSelector, match, mismatch []string, podLabels map[string]string) (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	add := func(keys []string, op metav1.LabelSelectorOperator) error {
		for _, k := range keys {
			v, ok := podLabels[k]
			if !ok {
				continue
			}
			req, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: op, Values: []string{v}}}})
			if err != nil {
				return err
			}
			rs, _ := req.Requirements()
			sel = sel.Add(rs...)
		}
		return nil
	}
	if err := add(match, metav1.LabelSelectorOpIn); err != nil {
		return nil, err
	}
	if err := add(mismatch, metav1.LabelSelectorOpNotIn); err != nil {
		return nil, err
	}
	return sel, nil
}

func podHostPorts(pod *v1.Pod) []HostPort {
	var out []HostPort
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := HostPort{IP: p.HostIP, Protocol: p.Protocol, Port: p.HostPort}
			if hp.IP == "" {
				hp.IP = "0.0.0.0"
			}
			if hp.Protocol == "" {
				hp.Protocol = v1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	return out
}

// NodeInfo is a node with the pods on it (bound, assumed or, in a dry run,
// nominated) and what they add up to. Snapshots hand out NodeInfos that do
// not change; Clone before changing one.
type NodeInfo struct {
	Node *v1.Node
	Pods []*PodInfo
	// PodsWithAffinity have any inter-pod (anti-)affinity term;
	// PodsWithRequiredAntiAffinity a required anti-affinity one.
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo
	Requested                    Resource
	NonZeroRequested             Resource
	Allocatable                  Resource
	// UsedPorts counts pods binding each host port.
	UsedPorts map[HostPort]int
	// Images maps each image name the node reports to its size in bytes.
	Images map[string]int64
}

// NewNodeInfo makes the NodeInfo of node (which may be nil: pods bound to
// a node the cache has not seen yet are kept until it arrives).
func NewNodeInfo(node *v1.Node, pods ...*PodInfo) *NodeInfo {
	n := &NodeInfo{}
	n.SetNode(node)
	for _, p := range pods {
		n.AddPod(p)
	}
	return n
}

// Name is the node's name.
func (n *NodeInfo) Name() string {
	if n.Node == nil {
		return ""
	}
	return n.Node.Name
}

// SetNode replaces the node object, keeping the pods.
func (n *NodeInfo) SetNode(node *v1.Node) {
	n.Node = node
	n.Allocatable = Resource{}
	n.Images = nil
	if node == nil {
		return
	}
	n.Allocatable = NewResource(node.Status.Allocatable)
	n.Images = nodeImages(node)
}

// nodeImages indexes the node's images under every name it reports, and
// also under the short Docker Hub form ("docker.io/library/nginx:1" as
// "nginx:1") that pod specs usually use.
func nodeImages(node *v1.Node) map[string]int64 {
	if len(node.Status.Images) == 0 {
		return nil
	}
	m := map[string]int64{}
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			m[name] = img.SizeBytes
			for _, prefix := range []string{"docker.io/library/", "docker.io/"} {
				if short, ok := strings.CutPrefix(name, prefix); ok {
					m[short] = img.SizeBytes
					break
				}
			}
		}
	}
	return m
}

// AddPod accounts for p on the node.
func (n *NodeInfo) AddPod(p *PodInfo) {
	n.Pods = append(n.Pods, p)
	if p.HasAffinity() {
		n.PodsWithAffinity = append(n.PodsWithAffinity, p)
	}
	if len(p.RequiredAntiAffinity) > 0 {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, p)
	}
	n.Requested.Add(&p.Requests, 1)
	n.NonZeroRequested.Add(&p.NonZero, 1)
	for _, hp := range p.HostPorts {
		if n.UsedPorts == nil {
			n.UsedPorts = map[HostPort]int{}
		}
		n.UsedPorts[hp]++
	}
}

// RemovePod undoes AddPod for the pod with p's UID; it reports whether the
// pod was there.
func (n *NodeInfo) RemovePod(p *PodInfo) bool {
	uid := p.Pod.UID
	i := indexOf(n.Pods, uid)
	if i < 0 {
		return false
	}
	old := n.Pods[i]
	n.Pods = deleteAt(n.Pods, i)
	if j := indexOf(n.PodsWithAffinity, uid); j >= 0 {
		n.PodsWithAffinity = deleteAt(n.PodsWithAffinity, j)
	}
	if j := indexOf(n.PodsWithRequiredAntiAffinity, uid); j >= 0 {
		n.PodsWithRequiredAntiAffinity = deleteAt(n.PodsWithRequiredAntiAffinity, j)
	}
	n.Requested.Add(&old.Requests, -1)
	n.NonZeroRequested.Add(&old.NonZero, -1)
	for _, hp := range old.HostPorts {
		if n.UsedPorts[hp]--; n.UsedPorts[hp] <= 0 {
			delete(n.UsedPorts, hp)
		}
	}
	return true
}

func indexOf(pods []*PodInfo, uid types.UID) int {
	for i, p := range pods {
		if p.Pod.UID == uid {
			return i
		}
	}
	return -1
}

// deleteAt removes index i without writing into the shared backing array
// of a clone's source.
func deleteAt(pods []*PodInfo, i int) []*PodInfo {
	out := make([]*PodInfo, 0, len(pods)-1)
	out = append(out, pods[:i]...)
	return append(out, pods[i+1:]...)
}

// Clone copies n so that adding or removing pods leaves n as it was.
func (n *NodeInfo) Clone() *NodeInfo {
	c := *n
	c.Pods = clip(n.Pods)
	c.PodsWithAffinity = clip(n.PodsWithAffinity)
	c.PodsWithRequiredAntiAffinity = clip(n.PodsWithRequiredAntiAffinity)
	c.Requested = n.Requested.Clone()
	c.NonZeroRequested = n.NonZeroRequested.Clone()
	if n.UsedPorts != nil {
		c.UsedPorts = make(map[HostPort]int, len(n.UsedPorts))
		for k, v := range n.UsedPorts {
			c.UsedPorts[k] = v
		}
	}
	return &c
}

// clip makes appends to the copy reallocate instead of writing into the
// original's spare capacity.
func clip(s []*PodInfo) []*PodInfo {
	return s[:len(s):len(s)]
}
