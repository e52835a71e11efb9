package kubelet

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/runtime/containers"
)

// UpdateResources records an in-place resize; updateErr makes it fail.
func (r *fakeRuntime) UpdateResources(_ context.Context, id string, res containers.Resources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.ctrs[id]
	if !ok || c.State != containers.StateRunning {
		return containers.ErrNotRunning
	}
	r.log.add("update %s/%s#%d shares=%d mem=%d", c.PodName, c.Name, c.Attempt, res.CPUShares, res.MemoryLimit)
	if err := r.startErr["update/"+c.Name]; err != nil {
		return err
	}
	cfg := r.cfgs[id]
	cfg.Resources = res
	r.cfgs[id] = cfg
	return nil
}

// milliShares stands in for the QoS cgroup math: shares = milli-CPU of the
// request, memory limit = the limit in bytes.
func milliShares(_ *corev1.Pod, c *corev1.Container) containers.Resources {
	cpu, mem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Limits[corev1.ResourceMemory]
	return containers.Resources{CPUShares: uint64(cpu.MilliValue()), MemoryLimit: mem.Value()}
}

func resizePod(name, cpu, memLimit string, policy ...corev1.ContainerResizePolicy) *corev1.Pod {
	p := testPod(name, corev1.RestartPolicyAlways, "app")
	p.Generation = 1
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memLimit)},
	}
	p.Spec.Containers[0].ResizePolicy = policy
	return p
}

func (h *harness) resize(name, cpu, memLimit string) {
	h.t.Helper()
	cur := h.get(name)
	cur.Generation++
	cur.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	cur.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse(memLimit)
	h.update(cur)
}

func hasCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestResize_InPlace_UpdatesCgroupsAndReportsResources(t *testing.T) {
	h := newHarness(t)
	h.cfg.QoS.ContainerResources = milliShares
	h.start()
	h.create(resizePod("rs", "100m", "100Mi"))
	c := h.running("rs", "app", 0)
	h.waitFor("resources reported", func() bool {
		cs := h.cstatus("rs", "app")
		return cs != nil && cs.Resources != nil && cs.Resources.Requests.Cpu().MilliValue() == 100 && cs.AllocatedResources.Cpu().MilliValue() == 100
	})
	h.resize("rs", "200m", "200Mi")
	h.waitFor("resize actuated and reported", func() bool {
		p := h.get("rs")
		cs := h.cstatus("rs", "app")
		return p.Status.ObservedGeneration == 2 && cs.Resources.Requests.Cpu().MilliValue() == 200 &&
			cs.Resources.Limits.Memory().Value() == 200<<20 && cs.AllocatedResources.Cpu().MilliValue() == 200 &&
			hasCondition(p, corev1.PodResizePending) == nil && hasCondition(p, corev1.PodResizeInProgress) == nil
	})
	if got := h.log.matching("update rs/app#0"); len(got) != 1 || got[0] != "update rs/app#0 shares=200 mem=209715200" {
		t.Fatalf("updates %v, want one with the new shares and limit", got)
	}
	if now := h.rt.find("rs", "app"); now.ID != c.ID || h.cstatus("rs", "app").RestartCount != 0 {
		t.Fatalf("the container was restarted by an in-place resize")
	}
}

func TestResize_RestartContainerPolicy_RestartsWithNewResources(t *testing.T) {
	h := newHarness(t)
	h.cfg.QoS.ContainerResources = milliShares
	h.start()
	h.create(resizePod("rr", "100m", "100Mi", corev1.ContainerResizePolicy{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}))
	h.running("rr", "app", 0)
	h.resize("rr", "100m", "300Mi")
	c := h.running("rr", "app", 1)
	if got := h.rt.config(c.ID).Resources.MemoryLimit; got != 300<<20 {
		t.Fatalf("restarted with memory limit %d, want 300Mi", got)
	}
	if got := h.log.matching("update rr/"); len(got) != 0 {
		t.Fatalf("a RestartContainer resource was updated in place: %v", got)
	}
	h.waitFor("status after restart", func() bool {
		cs := h.cstatus("rr", "app")
		return cs.RestartCount == 1 && cs.Resources != nil && cs.Resources.Limits.Memory().Value() == 300<<20
	})
}

func TestResize_TooBigForNode_PendingInfeasible(t *testing.T) {
	h := newHarness(t)
	h.cfg.QoS.ContainerResources = milliShares
	node, _ := h.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.create(resizePod("big", "100m", "100Mi"))
	h.running("big", "app", 0)
	h.resize("big", "3", "100Mi")
	h.waitFor("PodResizePending Infeasible", func() bool {
		c := hasCondition(h.get("big"), corev1.PodResizePending)
		return c != nil && c.Reason == corev1.PodReasonInfeasible && c.ObservedGeneration == 2
	})
	if cs := h.cstatus("big", "app"); cs.AllocatedResources.Cpu().MilliValue() != 100 || len(h.log.matching("update big/")) != 0 {
		t.Fatalf("an infeasible resize was allocated: %v, updates %v", cs.AllocatedResources, h.log.matching("update big/"))
	}
	// Back within the node's capacity: allocated and applied.
	h.resize("big", "1", "100Mi")
	h.waitFor("resize allocated", func() bool {
		p := h.get("big")
		return hasCondition(p, corev1.PodResizePending) == nil && h.cstatus("big", "app").AllocatedResources.Cpu().MilliValue() == 1000
	})
}

func TestResize_UpdateFails_InProgressWithError(t *testing.T) {
	h := newHarness(t)
	h.cfg.QoS.ContainerResources = milliShares
	h.rt.startErr["update/app"] = errors.New("memory limit below usage")
	h.start()
	h.create(resizePod("stuck", "100m", "100Mi"))
	h.running("stuck", "app", 0)
	h.resize("stuck", "100m", "10Mi")
	h.waitFor("PodResizeInProgress Error", func() bool {
		p := h.get("stuck")
		c := hasCondition(p, corev1.PodResizeInProgress)
		cs := h.cstatus("stuck", "app")
		return c != nil && c.Reason == corev1.PodReasonError && cs.Resources.Limits.Memory().Value() == 100<<20 && cs.AllocatedResources != nil
	})
}
