package algorithm

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The requests a pod without any is assumed to make, for scoring only: a
// node full of request-less pods must not look empty to the spreading
// scores (upstream's non-zero defaults).
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// Resource is an amount of each schedulable resource.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// AllowedPodNumber is only meaningful for allocatable amounts.
	AllowedPodNumber int
	// Scalar holds extended resources, hugepages and anything else named.
	Scalar map[v1.ResourceName]int64
}

// NewResource converts a resource list.
func NewResource(rl v1.ResourceList) Resource {
	var r Resource
	for name, q := range rl {
		r.set(name, q)
	}
	return r
}

func (r *Resource) set(name v1.ResourceName, q resource.Quantity) {
	switch name {
	case v1.ResourceCPU:
		r.MilliCPU = q.MilliValue()
	case v1.ResourceMemory:
		r.Memory = q.Value()
	case v1.ResourceEphemeralStorage:
		r.EphemeralStorage = q.Value()
	case v1.ResourcePods:
		r.AllowedPodNumber = int(q.Value())
	default:
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[name] = q.Value()
	}
}

// Get returns the amount of one resource (pods excluded).
func (r *Resource) Get(name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.MilliCPU
	case v1.ResourceMemory:
		return r.Memory
	case v1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	case v1.ResourcePods:
		return int64(r.AllowedPodNumber)
	}
	return r.Scalar[name]
}

// Add adds o (sign 1) or takes it away (sign -1).
func (r *Resource) Add(o *Resource, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for name, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[v1.ResourceName]int64{}
		}
		r.Scalar[name] += sign * v
	}
}

// Clone copies r, map included.
func (r Resource) Clone() Resource {
	if r.Scalar != nil {
		m := make(map[v1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			m[k] = v
		}
		r.Scalar = m
	}
	return r
}

// IsZero reports whether nothing is requested.
func (r *Resource) IsZero() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.EphemeralStorage != 0 {
		return false
	}
	for _, v := range r.Scalar {
		if v != 0 {
			return false
		}
	}
	return true
}

// PodRequests is what a pod needs on its node, as the kubelet admits it:
// app containers and sidecars (restartable init containers) run together
// and add up; each ordinary init container runs alone beside the sidecars
// started before it, so only the largest such moment counts; then
// spec.overhead is added. Pod-level resources, when set, replace the
// container sum for cpu and memory.
func PodRequests(pod *v1.Pod) Resource {
	return podRequests(pod, nil)
}

// PodNonZeroRequests is PodRequests with containers that request no cpu or
// memory counted at the defaults, for the scores.
func PodNonZeroRequests(pod *v1.Pod) Resource {
	return podRequests(pod, v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(DefaultMemoryRequest, resource.BinarySI),
	})
}

func podRequests(pod *v1.Pod, missing v1.ResourceList) Resource {
	withDefaults := func(rl v1.ResourceList) v1.ResourceList {
		if missing == nil {
			return rl
		}
		out := make(v1.ResourceList, len(rl)+len(missing))
		for k, v := range rl {
			out[k] = v
		}
		for k, v := range missing {
			if _, ok := rl[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	reqs := v1.ResourceList{}
	for i := range pod.Spec.Containers {
		addList(reqs, withDefaults(pod.Spec.Containers[i].Resources.Requests))
	}
	sidecars := v1.ResourceList{}
	initMax := v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := withDefaults(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			addList(reqs, r)
			addList(sidecars, r)
			maxList(initMax, sidecars)
			continue
		}
		moment := v1.ResourceList{}
		addList(moment, r)
		addList(moment, sidecars)
		maxList(initMax, moment)
	}
	maxList(reqs, initMax)
	if pr := pod.Spec.Resources; pr != nil {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := pr.Requests[name]; ok {
				reqs[name] = q
			}
		}
	}
	addList(reqs, pod.Spec.Overhead)
	return NewResource(reqs)
}

func addList(into, from v1.ResourceList) {
	for k, v := range from {
		if cur, ok := into[k]; ok {
			cur.Add(v)
			into[k] = cur
		} else {
			into[k] = v.DeepCopy()
		}
	}
}

func maxList(into, from v1.ResourceList) {
	for k, v := range from {
		if cur, ok := into[k]; !ok || v.Cmp(cur) > 0 {
			into[k] = v.DeepCopy()
		}
	}
}
