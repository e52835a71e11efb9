package nodestatus

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeHost writes the files host reads into a temporary root.
func fakeHost(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"/proc/meminfo":                   "MemTotal:        8148220 kB\nMemFree:  100 kB\n",
		"/etc/machine-id":                 "0123456789abcdef0123456789abcdef\n",
		"/sys/class/dmi/id/product_uuid":  "4C4C4544-0042-3510-8050-B4C04F4E3132\n",
		"/proc/sys/kernel/random/boot_id": "b0b0b0b0-1111-2222-3333-444444444444\n",
		"/proc/sys/kernel/osrelease":      "6.1.0-99-amd64\n",
		"/etc/os-release":                 "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
		"/proc/net/route":                 "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n",
	}
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// readyFlag is a Ready func the test flips.
type readyFlag struct{ msg atomic.Pointer[string] }

func (f *readyFlag) set(msg string) { f.msg.Store(&msg) }
func (f *readyFlag) ready() error {
	if p := f.msg.Load(); p != nil && *p != "" {
		return errors.New(*p)
	}
	return nil
}

// testConfig is a Config for node edge-1 on a fake host. The fake
// clientset does not set UIDs, so a reactor gives created objects one, as
// the API server would.
func testConfig(t *testing.T, cs *fake.Clientset) Config {
	t.Helper()
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, kruntime.Object, error) {
		if obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && obj.GetUID() == "" {
			obj.SetUID(types.UID("uid-" + obj.GetName()))
		}
		return false, nil, nil
	})
	return Config{
		NodeName:       "edge-1",
		Client:         cs,
		NodeIPs:        []net.IP{net.ParseIP("172.30.1.2")},
		DataDir:        t.TempDir(),
		KubeletVersion: "v1.37.2+skiff-test",
		hostRoot:       fakeHost(t),
	}
}

func newReporter(t *testing.T, cfg Config) *Reporter {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func getNode(t *testing.T, cs *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func TestRegister_NewNode_CarriesLabelsTaintsCapacityAddressesInfoAndConditions(t *testing.T) {
	cs := fake.NewClientset()
	cfg := testConfig(t, cs)
	cfg.ControlPlane = true
	cfg.Labels = map[string]string{"tier": "edge"}
	cfg.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	cfg.Annotations = func() map[string]string { return map[string]string{"skiff.io/backend": "vxlan"} }
	cfg.Images = func(context.Context) ([]corev1.ContainerImage, error) {
		return []corev1.ContainerImage{{Names: []string{"docker.io/library/busybox:latest"}, SizeBytes: 10}, {Names: []string{"big:1"}, SizeBytes: 99}}, nil
	}
	cfg.Reserved = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")}
	if _, err := newReporter(t, cfg).Register(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	n := getNode(t, cs, "edge-1")

	wantLabels := map[string]string{
		LabelHostname: "edge-1", LabelOS: "linux", LabelArch: runtime.GOARCH, LabelBetaOS: "linux", LabelBetaArch: runtime.GOARCH,
		LabelInstanceType: "skiff", LabelControlPlane: "true", "tier": "edge",
	}
	for k, v := range wantLabels {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations["skiff.io/backend"] != "vxlan" {
		t.Errorf("annotations %v, want the network's merged in", n.Annotations)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v, want the registration taint", n.Spec.Taints)
	}
	st := n.Status
	if got := st.Capacity.Memory().String(); got != "8148220Ki" {
		t.Errorf("memory capacity %s, want MemTotal 8148220Ki", got)
	}
	if got := st.Allocatable.Memory().Value(); got != 8148220*1024-100*1024*1024 {
		t.Errorf("allocatable memory %d, want capacity minus reserved", got)
	}
	if st.Capacity.Cpu().Value() != int64(runtime.NumCPU()) || st.Capacity.Pods().Value() != 110 || st.Capacity.StorageEphemeral().Value() <= 0 {
		t.Errorf("capacity %v", st.Capacity)
	}
	if q, ok := st.Capacity["hugepages-2Mi"]; !ok || !q.IsZero() {
		t.Errorf("hugepages-2Mi %v, want 0", st.Capacity)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.1.2"}, {Type: corev1.NodeHostName, Address: "edge-1"}}
	if len(st.Addresses) != 2 || st.Addresses[0] != wantAddrs[0] || st.Addresses[1] != wantAddrs[1] {
		t.Errorf("addresses %v, want %v", st.Addresses, wantAddrs)
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("kubelet port %d", st.DaemonEndpoints.KubeletEndpoint.Port)
	}
	wantInfo := corev1.NodeSystemInfo{
		MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "4C4C4544-0042-3510-8050-B4C04F4E3132",
		BootID: "b0b0b0b0-1111-2222-3333-444444444444", KernelVersion: "6.1.0-99-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
		ContainerRuntimeVersion: "containerd://2.4.2", KubeletVersion: "v1.37.2+skiff-test", KubeProxyVersion: "v1.37.2+skiff-test",
		OperatingSystem: "linux", Architecture: runtime.GOARCH,
	}
	if st.NodeInfo != wantInfo {
		t.Errorf("nodeInfo\n got %+v\nwant %+v", st.NodeInfo, wantInfo)
	}
	if len(st.Images) != 2 || st.Images[0].Names[0] != "big:1" {
		t.Errorf("images %v, want both, largest first", st.Images)
	}
	want := []struct {
		typ    corev1.NodeConditionType
		status corev1.ConditionStatus
		reason string
	}{
		{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"},
		{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"},
		{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"},
	}
	if len(st.Conditions) != len(want) {
		t.Fatalf("conditions %v", st.Conditions)
	}
	for i, w := range want {
		c := st.Conditions[i]
		if c.Type != w.typ || c.Status != w.status || c.Reason != w.reason || c.LastHeartbeatTime.IsZero() || c.LastTransitionTime.IsZero() {
			t.Errorf("condition %d = %+v, want %v %v %v with times", i, c, w.typ, w.status, w.reason)
		}
	}
	if c := condition(n, corev1.NodeReady); c.Message != "kubelet is posting ready status" {
		t.Errorf("ready message %q", c.Message)
	}
}

func TestRegister_ExistingNode_MergesLabelsKeepsTaintsSpecAndForeignConditions(t *testing.T) {
	existing := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"admin": "set", "tier": "old"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.42.3.0/24", Taints: []corev1.Taint{{Key: "admin", Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated"},
		}},
	}
	cs := fake.NewClientset(existing)
	cfg := testConfig(t, cs)
	cfg.Labels = map[string]string{"tier": "edge"}
	cfg.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := newReporter(t, cfg).Register(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	n := getNode(t, cs, "edge-1")
	if n.Labels["admin"] != "set" || n.Labels["tier"] != "edge" || n.Labels[LabelHostname] != "edge-1" {
		t.Errorf("labels %v, want the admin's kept and ours merged over", n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "admin" {
		t.Errorf("taints %v, want registration taints left out on an existing node", n.Spec.Taints)
	}
	if n.Spec.PodCIDR != "10.42.3.0/24" {
		t.Errorf("podCIDR %q lost", n.Spec.PodCIDR)
	}
	if c := condition(n, corev1.NodeNetworkUnavailable); c.Reason != "RouteCreated" {
		t.Errorf("foreign condition dropped: %v", n.Status.Conditions)
	}
	if c := condition(n, corev1.NodeReady); c.Status != corev1.ConditionTrue {
		t.Errorf("ready %v", c)
	}
}

// conflictOnce makes the first status update fail with a conflict after
// another writer (the node IPAM controller) set spec.podCIDR, as happens to
// a node right after it is created.
func conflictOnce(cs *fake.Clientset, verb, resource, subresource string, before func()) *atomic.Int32 {
	var n atomic.Int32
	cs.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, kruntime.Object, error) {
		if a.GetSubresource() != subresource || n.Add(1) > 1 {
			return false, nil, nil
		}
		if before != nil {
			before()
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: resource}, "edge-1", errors.New("the object has been modified"))
	})
	return &n
}

func TestRegister_ConflictWithIPAM_RetriesFromFreshNodeAndKeepsPodCIDR(t *testing.T) {
	cs := fake.NewClientset()
	ipam := func() {
		n, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "edge-1")
		if err != nil {
			panic(err)
		}
		node := n.(*corev1.Node).DeepCopy()
		node.Spec.PodCIDR = "10.42.7.0/24"
		if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, node, ""); err != nil {
			panic(err)
		}
	}
	calls := conflictOnce(cs, "update", "nodes", "status", ipam)
	if _, err := newReporter(t, testConfig(t, cs)).Register(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("register after one conflict: %v", err)
	}
	if calls.Load() < 2 {
		t.Fatalf("status updates %d, want a retry after the conflict", calls.Load())
	}
	n := getNode(t, cs, "edge-1")
	if n.Spec.PodCIDR != "10.42.7.0/24" {
		t.Errorf("podCIDR %q, want the IPAM controller's write kept", n.Spec.PodCIDR)
	}
	if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue {
		t.Errorf("status not posted after the retry: %v", n.Status.Conditions)
	}
}

func TestSyncStatus_MetadataConflict_IsRetried(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}})
	cfg := testConfig(t, cs)
	cfg.Annotations = func() map[string]string { return map[string]string{"skiff.io/vtep-mac": "aa:bb"} }
	calls := conflictOnce(cs, "update", "nodes", "", nil)
	if err := newReporter(t, cfg).SyncStatus(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if calls.Load() < 2 || getNode(t, cs, "edge-1").Annotations["skiff.io/vtep-mac"] != "aa:bb" {
		t.Errorf("metadata update calls %d, annotations %v", calls.Load(), getNode(t, cs, "edge-1").Annotations)
	}
}

func TestConditions_PressureTable(t *testing.T) {
	cases := []struct {
		name            string
		mem, disk, pid  bool
		wantMem, wantDs string
		wantPID         string
	}{
		{"none", false, false, false, "KubeletHasSufficientMemory", "KubeletHasNoDiskPressure", "KubeletHasSufficientPID"},
		{"memory", true, false, false, "KubeletHasInsufficientMemory", "KubeletHasNoDiskPressure", "KubeletHasSufficientPID"},
		{"disk", false, true, false, "KubeletHasSufficientMemory", "KubeletHasDiskPressure", "KubeletHasSufficientPID"},
		{"pid", false, false, true, "KubeletHasSufficientMemory", "KubeletHasNoDiskPressure", "KubeletHasInsufficientPID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewClientset()
			cfg := testConfig(t, cs)
			cfg.Pressure = func() (bool, bool, bool) { return c.mem, c.disk, c.pid }
			if _, err := newReporter(t, cfg).Register(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			n := getNode(t, cs, "edge-1")
			for typ, want := range map[corev1.NodeConditionType]struct {
				on     bool
				reason string
			}{corev1.NodeMemoryPressure: {c.mem, c.wantMem}, corev1.NodeDiskPressure: {c.disk, c.wantDs}, corev1.NodePIDPressure: {c.pid, c.wantPID}} {
				got := condition(n, typ)
				wantStatus := corev1.ConditionFalse
				if want.on {
					wantStatus = corev1.ConditionTrue
				}
				if got.Status != wantStatus || got.Reason != want.reason {
					t.Errorf("%s = %s/%s, want %s/%s", typ, got.Status, got.Reason, wantStatus, want.reason)
				}
			}
			if condition(n, corev1.NodeReady).Status != corev1.ConditionTrue {
				t.Errorf("pressure must not make the node unready")
			}
		})
	}
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func runReporter(t *testing.T, r *Reporter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func TestRun_ReadyChanges_PostedPromptlyWithTransitionTimes(t *testing.T) {
	cs := fake.NewClientset()
	cfg := testConfig(t, cs)
	var flag readyFlag
	flag.set("container runtime network not ready: pod network has no podCIDR yet")
	cfg.Ready = flag.ready
	cfg.StatusInterval = time.Hour // only Ready changes may post
	cfg.ReadyPoll = 10 * time.Millisecond
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	cfg.now = func() time.Time { return time.Unix(clock.Add(1), 0) }
	runReporter(t, newReporter(t, cfg))

	var notReady corev1.NodeCondition
	eventually(t, 5*time.Second, "registered not ready", func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "edge-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		notReady = condition(n, corev1.NodeReady)
		return notReady.Status == corev1.ConditionFalse
	})
	if notReady.Reason != "KubeletNotReady" || notReady.Message != "container runtime network not ready: pod network has no podCIDR yet" {
		t.Fatalf("not-ready condition %+v", notReady)
	}
	flag.set("")
	var ready corev1.NodeCondition
	eventually(t, 5*time.Second, "ready posted after Ready() changed", func() bool {
		ready = condition(getNode(t, cs, "edge-1"), corev1.NodeReady)
		return ready.Status == corev1.ConditionTrue
	})
	if ready.Reason != "KubeletReady" || !ready.LastTransitionTime.After(notReady.LastTransitionTime.Time) {
		t.Fatalf("ready condition %+v, want KubeletReady with a later transition than %v", ready, notReady.LastTransitionTime)
	}
	mem := condition(getNode(t, cs, "edge-1"), corev1.NodeMemoryPressure)
	if !mem.LastTransitionTime.Before(&mem.LastHeartbeatTime) {
		t.Fatalf("memory pressure did not change, so its transition %v must stay before its heartbeat %v", mem.LastTransitionTime, mem.LastHeartbeatTime)
	}
}

func TestRun_Trigger_PostsStatusImmediately(t *testing.T) {
	cs := fake.NewClientset()
	cfg := testConfig(t, cs)
	var images atomic.Int32
	cfg.Images = func(context.Context) ([]corev1.ContainerImage, error) {
		n := images.Load()
		out := make([]corev1.ContainerImage, n)
		for i := range out {
			out[i] = corev1.ContainerImage{Names: []string{"img:" + string(rune('a'+i))}, SizeBytes: 1}
		}
		return out, nil
	}
	cfg.StatusInterval = time.Hour
	r := newReporter(t, cfg)
	runReporter(t, r)
	eventually(t, 5*time.Second, "registered", func() bool {
		_, err := cs.CoreV1().Nodes().Get(context.Background(), "edge-1", metav1.GetOptions{})
		return err == nil
	})
	images.Store(2)
	r.Trigger()
	eventually(t, 5*time.Second, "images posted after Trigger", func() bool {
		return len(getNode(t, cs, "edge-1").Status.Images) == 2
	})
}

func TestRun_Lease_CreatedOwnedByNodeAndRenewed(t *testing.T) {
	cs := fake.NewClientset()
	cfg := testConfig(t, cs)
	cfg.RenewInterval = 20 * time.Millisecond
	runReporter(t, newReporter(t, cfg))
	leases := cs.CoordinationV1().Leases(LeaseNamespace)
	var first *metav1.MicroTime
	eventually(t, 5*time.Second, "lease created", func() bool {
		l, err := leases.Get(context.Background(), "edge-1", metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false
		}
		first = l.Spec.RenewTime
		return true
	})
	node := getNode(t, cs, "edge-1")
	eventually(t, 5*time.Second, "lease renewed", func() bool {
		l, err := leases.Get(context.Background(), "edge-1", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first.Time)
	})
	l, _ := leases.Get(context.Background(), "edge-1", metav1.GetOptions{})
	if *l.Spec.HolderIdentity != "edge-1" || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != node.UID || l.OwnerReferences[0].APIVersion != "v1" {
		t.Errorf("owner references %+v, want the Node %s", l.OwnerReferences, node.UID)
	}
}

func TestRenewLease_ExistingLeaseWithoutOwner_GetsOwnerAndNewRenewTime(t *testing.T) {
	cs := fake.NewClientset()
	r := newReporter(t, testConfig(t, cs))
	ctx := ctxFor(t, 10*time.Second)
	if err := r.RenewLease(ctx); err != nil { // before the Node exists: no owner yet
		t.Fatal(err)
	}
	l, err := cs.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "edge-1", metav1.GetOptions{})
	if err != nil || len(l.OwnerReferences) != 0 {
		t.Fatalf("lease %v, %v: want one without owner before registration", l, err)
	}
	if _, err := r.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, _ = cs.CoordinationV1().Leases(LeaseNamespace).Get(ctx, "edge-1", metav1.GetOptions{})
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Name != "edge-1" {
		t.Fatalf("owner references %v after registration", l.OwnerReferences)
	}
}

func TestRenewLease_DeletedOrConflicting_IsRecreatedOrReread(t *testing.T) {
	cs := fake.NewClientset()
	r := newReporter(t, testConfig(t, cs))
	ctx := ctxFor(t, 10*time.Second)
	leases := cs.CoordinationV1().Leases(LeaseNamespace)
	if err := r.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leases.Delete(ctx, "edge-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.RenewLease(ctx); err != nil {
		t.Fatalf("renew after the lease was deleted: %v", err)
	}
	if _, err := leases.Get(ctx, "edge-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("lease not recreated: %v", err)
	}
	calls := conflictOnce(cs, "update", "leases", "", nil)
	if err := r.RenewLease(ctx); err != nil {
		t.Fatalf("renew after a conflict: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("lease updates %d, want the cached one refused then one after a fresh read", calls.Load())
	}
}

func TestWaitForPodCIDR_ReturnsOnceAssigned_ErrorsWhenContextEnds(t *testing.T) {
	cs := fake.NewClientset()
	r := newReporter(t, testConfig(t, cs))
	ctx := ctxFor(t, 10*time.Second)
	if _, err := r.Register(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if cidr, err := r.WaitForPodCIDR(short); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no podCIDR yet: got %v, %v; want the context's error", cidr, err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		n, err := cs.CoreV1().Nodes().Get(ctx, "edge-1", metav1.GetOptions{})
		if err != nil {
			return
		}
		n.Spec.PodCIDR = "10.42.5.0/24"
		cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	}()
	cidr, err := r.WaitForPodCIDR(ctx)
	if err != nil || cidr.String() != "10.42.5.0/24" {
		t.Fatalf("got %v, %v; want 10.42.5.0/24", cidr, err)
	}
}

func TestWatchPeers_SeesOtherNodesOnly_IgnoresHeartbeats(t *testing.T) {
	self := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}}
	peer := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-2"}, Spec: corev1.NodeSpec{PodCIDR: "10.42.2.0/24"}}
	cs := fake.NewClientset(self, peer)
	r := newReporter(t, testConfig(t, cs))
	calls := make(chan []corev1.Node, 10)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.WatchPeers(ctx, func(n []corev1.Node) { calls <- n }) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	next := func(what string) []corev1.Node {
		t.Helper()
		select {
		case n := <-calls:
			return n
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no onChange call", what)
			return nil
		}
	}
	if got := next("initial"); len(got) != 1 || got[0].Name != "edge-2" {
		t.Fatalf("initial peers %v, want edge-2 only", got)
	}
	// A heartbeat-only status change is not reported.
	p := getNode(t, cs, "edge-2")
	p.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.Now()}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A new peer is.
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next("peer added"); len(got) != 2 || got[0].Name != "edge-0" || got[1].Name != "edge-2" {
		t.Fatalf("peers %v, want edge-0, edge-2 sorted", got)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "edge-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next("peer deleted"); len(got) != 1 || got[0].Name != "edge-0" {
		t.Fatalf("peers %v, want edge-0", got)
	}
	select {
	case extra := <-calls:
		t.Fatalf("unexpected extra call %v (heartbeat-only change reported?)", extra)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestNew_RequiresNameClientAndDataDir(t *testing.T) {
	if _, err := New(Config{NodeName: "x"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
}

func TestDetectNodeIPs_DefaultRouteInterfaceFirst(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc/net"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/net/route"), []byte(
		"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n"+
			"lo\t0000007F\t00000000\t0001\t0\t0\t0\t000000FF\n"+
			"eth9\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\n"), 0o644)
	if got := (host{root: root}).defaultRouteInterface(); got != "eth9" {
		t.Fatalf("default route interface %q, want eth9", got)
	}
	ips, err := DetectNodeIPs()
	if err != nil || len(ips) != 1 || !ips[0].IsGlobalUnicast() {
		t.Fatalf("detected %v, %v: want one global unicast address on this machine", ips, err)
	}
}

func TestSyncStatus_ExtendedResourceAdvertisedByOthers_IsKept(t *testing.T) {
	fakeRes := corev1.ResourceName("example.com/fakecpu")
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{fakeRes: resource.MustParse("800"), "kubernetes.io/stale": resource.MustParse("1")},
			// Allocatable follows capacity, whatever it said before.
			Allocatable: corev1.ResourceList{fakeRes: resource.MustParse("5")},
		}})
	if err := newReporter(t, testConfig(t, cs)).SyncStatus(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	n := getNode(t, cs, "edge-1")
	if q := n.Status.Capacity[fakeRes]; q.Cmp(resource.MustParse("800")) != 0 {
		t.Errorf("capacity of %s = %s, want 800 kept", fakeRes, q.String())
	}
	if q := n.Status.Allocatable[fakeRes]; q.Cmp(resource.MustParse("800")) != 0 {
		t.Errorf("allocatable of %s = %s, want 800", fakeRes, q.String())
	}
	if _, ok := n.Status.Capacity["kubernetes.io/stale"]; ok {
		t.Error("a kubernetes.io resource nobody reports was kept")
	}
	if _, ok := n.Status.Capacity[corev1.ResourceCPU]; !ok {
		t.Error("cpu capacity missing")
	}
}
