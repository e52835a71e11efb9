package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// fakeKubelets play the kubelet of a few Node objects, as the control-loop
// tests are allowed to (no containers are needed there): they register the
// nodes, renew their Leases, report bound pods Running and Ready with an
// address, and confirm the deletion of terminating pods. A node can be
// "stopped" (no renewals, no pod updates: a dead machine) and restarted.
type fakeKubelets struct {
	t  *testing.T
	cs kubernetes.Interface

	mu       sync.Mutex
	stopped  map[string]bool
	notReady map[string]bool // pod names the "kubelet" reports unready
	nextIP   int
	ips      map[string]string
	wake     chan struct{}
}

func startFakeKubelets(t *testing.T, ctx context.Context, cs kubernetes.Interface, nodes ...string) *fakeKubelets {
	t.Helper()
	// Own context: cleanups run last-registered first, so the caller's
	// context is still live when ours must stop the loops.
	ctx, cancel := context.WithCancel(ctx)
	k := &fakeKubelets{t: t, cs: cs, stopped: map[string]bool{}, notReady: map[string]bool{}, ips: map[string]string{}, wake: make(chan struct{}, 1)}
	for i, name := range nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("register node %s: %v", name, err)
		}
		// Controllers (node IPAM) write the new node too: retry on conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status = nodeStatus(fmt.Sprintf("10.99.0.%d", i+1))
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("node %s status: %v", name, err)
		}
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	pods := factory.Core().V1().Pods()
	poke := func(any) {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { k.renewLoop(ctx, nodes) })
	wg.Go(func() { k.podLoop(ctx, pods.Lister().List) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
	return k
}

func nodeStatus(ip string) corev1.NodeStatus {
	now := metav1.Now()
	return corev1.NodeStatus{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
		},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
		},
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2+skiff-fake", OperatingSystem: "linux", Architecture: "amd64"},
	}
}

// stop makes a node go silent, as a machine that lost power.
func (k *fakeKubelets) stop(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped[node] = true
}

// restart brings a node back: it renews again and reports Ready.
func (k *fakeKubelets) restart(ctx context.Context, node string) {
	k.t.Helper()
	k.mu.Lock()
	delete(k.stopped, node)
	k.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = nodeStatus(n.Status.Addresses[0].Address).Conditions
		_, err = k.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		k.t.Errorf("restart node %s: %v", node, err)
	}
}

// setReady makes the "kubelet" report a pod ready or not.
func (k *fakeKubelets) setReady(pod string, ready bool) {
	k.mu.Lock()
	if ready {
		delete(k.notReady, pod)
	} else {
		k.notReady[pod] = true
	}
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *fakeKubelets) isStopped(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopped[node]
}

// renewLoop renews each live node's Lease every second (a real kubelet
// renews every 10 s; the tests use short grace periods).
func (k *fakeKubelets) renewLoop(ctx context.Context, nodes []string) {
	leases := k.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, node := range nodes {
			if k.isStopped(node) {
				continue
			}
			now := metav1.NewMicroTime(time.Now())
			l, err := leases.Get(ctx, node, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, err = leases.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: node},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
				}, metav1.CreateOptions{})
			case err == nil:
				l.Spec.RenewTime = &now
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			if err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
				k.t.Logf("fake kubelet %s: renew lease: %v", node, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// podLoop brings the status of every pod on a live node in line with what
// a kubelet would report, whenever pods change.
func (k *fakeKubelets) podLoop(ctx context.Context, list func(selector labels.Selector) ([]*corev1.Pod, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
		case <-time.After(time.Second):
		}
		pods, err := list(labels.Everything())
		if err != nil {
			continue
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" || k.isStopped(p.Spec.NodeName) {
				continue
			}
			k.syncPod(ctx, p)
		}
	}
}

func (k *fakeKubelets) syncPod(ctx context.Context, p *corev1.Pod) {
	pods := k.cs.CoreV1().Pods(p.Namespace)
	if p.DeletionTimestamp != nil {
		// Containers stopped: confirm the deletion, as the kubelet does.
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			k.t.Logf("fake kubelet: delete %s: %v", p.Name, err)
		}
		return
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		// Run-to-completion pods (jobs) finish at once, successfully.
		if p.Status.Phase != corev1.PodSucceeded {
			p = p.DeepCopy()
			p.Status = succeededStatus(p)
			if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				k.t.Logf("fake kubelet: status of %s: %v", p.Name, err)
			}
		}
		return
	}
	k.mu.Lock()
	ready := !k.notReady[p.Name]
	ip, ok := k.ips[string(p.UID)]
	if !ok {
		k.nextIP++
		ip = fmt.Sprintf("10.42.%d.%d", k.nextIP/250, k.nextIP%250+2)
		k.ips[string(p.UID)] = ip
	}
	k.mu.Unlock()
	want := podStatus(p, ip, ready)
	if p.Status.Phase == corev1.PodRunning && p.Status.PodIP == ip && podIsReady(p) == ready {
		return
	}
	p = p.DeepCopy()
	p.Status = want
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		k.t.Logf("fake kubelet: status of %s: %v", p.Name, err)
	}
}

func podStatus(p *corev1.Pod, ip string, ready bool) corev1.PodStatus {
	now := metav1.Now()
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	st := corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: "10.99.0.1", StartTime: &now,
		QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: cond, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: cond, LastTransitionTime: now},
		},
	}
	for _, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sha256:fake", Ready: ready, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return st
}

func succeededStatus(p *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	st := corev1.PodStatus{
		Phase: corev1.PodSucceeded, HostIP: "10.99.0.1", StartTime: &now, QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
		},
	}
	for _, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sha256:fake", Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	return st
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
