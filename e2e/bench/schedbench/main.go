// Command schedbench measures a running skiff server's scheduler over
// HTTPS, as a user of the cluster sees it.
//
// It creates -nodes fake Node objects (32 cpu, 128 GiB, 110 pods, labelled
// skiff.io/schedbench=<run>), keeps them Ready as kubelets would (a Lease
// in kube-node-lease renewed every -lease-interval, the Ready condition
// re-posted every -status-interval), waits until the scheduler can use
// them, then creates -pods pods with -clients concurrent clients (each its
// own connection) in a fresh namespace and watches them get bound. Pods
// select the fake nodes by label, so a real node's kubelet never gets one.
//
// It prints the node set-up time, then the pod phase: creation rate,
// scheduling throughput (pods / time from the first create to the last
// binding) and create→bound latency percentiles. Unless -keep, it deletes
// everything it made at the end (also on ^C): pods with grace period 0 (no
// kubelet will ever confirm their deletion), the namespace, the leases and
// the nodes.
//
//	go run ./e2e/bench/schedbench -kubeconfig K -nodes 1000 -pods 10000 -clients 16
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

const (
	benchLabel   = "skiff.io/schedbench"
	leaseNS      = "kube-node-lease"
	protobufType = "application/vnd.kubernetes.protobuf"
)

type options struct {
	kubeconfig     string
	nodes, pods    int
	clients        int
	cpu, memory    string
	leaseInterval  time.Duration
	statusInterval time.Duration
	readyTimeout   time.Duration
	timeout        time.Duration
	keep, proto    bool
	deployment     bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig path")
	flag.IntVar(&o.nodes, "nodes", 1000, "fake nodes to create")
	flag.IntVar(&o.pods, "pods", 10000, "pods to create and have scheduled")
	flag.IntVar(&o.clients, "clients", 16, "concurrent clients creating nodes and pods, each its own connection")
	flag.StringVar(&o.cpu, "cpu", "100m", "cpu request of each pod")
	flag.StringVar(&o.memory, "memory", "128Mi", "memory request of each pod")
	flag.DurationVar(&o.leaseInterval, "lease-interval", 10*time.Second, "how often node leases are renewed")
	flag.DurationVar(&o.statusInterval, "status-interval", time.Minute, "how often node Ready status is re-posted")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for the nodes to become schedulable")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.BoolVar(&o.keep, "keep", false, "leave nodes, leases, namespace and pods in place")
	flag.BoolVar(&o.proto, "proto", false, "talk protobuf instead of JSON")
	flag.BoolVar(&o.deployment, "deployment", false, "create one Deployment of -pods replicas instead of bare pods: measures the controllers and the scheduler together")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.nodes < 1 || o.pods < 1 || o.clients < 1 {
		return errors.New("-nodes, -pods and -clients must be positive")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	clients := make([]*kubernetes.Clientset, o.clients)
	for i := range clients {
		clients[i] = newClient(cfg, o.proto)
	}
	b := &bench{o: o, admin: clients[0], clients: clients, run: fmt.Sprintf("schedbench-%d", time.Now().Unix()%1000000)}
	for i := range o.nodes {
		b.nodeNames = append(b.nodeNames, fmt.Sprintf("%s-node-%05d", b.run, i))
	}
	if !o.keep {
		defer b.cleanup()
	}
	if err := b.setUpNodes(ctx); err != nil {
		return err
	}
	// keepReady stops between rounds rather than by cancelling its
	// requests, and before cleanup, which must not race a lease renewal.
	stopKeeping, kept := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(kept)
		b.keepReady(ctx, stopKeeping)
	}()
	defer func() {
		close(stopKeeping)
		<-kept
	}()
	if err := b.waitSchedulable(ctx); err != nil {
		return err
	}
	if o.deployment {
		return b.reconcileDeployment(ctx)
	}
	return b.schedulePods(ctx)
}

// newClient returns a clientset with its own connection (a custom Dial
// keeps client-go from sharing its cached transport) and no client-side
// rate limit.
func newClient(cfg *rest.Config, proto bool) *kubernetes.Clientset {
	cc := rest.CopyConfig(cfg)
	cc.QPS, cc.Burst, cc.RateLimiter = -1, 0, nil
	cc.Timeout = time.Minute
	if proto {
		cc.ContentType = protobufType
		cc.AcceptContentTypes = protobufType + ",application/json"
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cc.Dial = d.DialContext
	return kubernetes.NewForConfigOrDie(cc)
}

type bench struct {
	o         options
	admin     *kubernetes.Clientset
	clients   []*kubernetes.Clientset
	run       string
	nodeNames []string
}

// parallel runs fn for 0..n-1 with one worker per client, returning the
// first error.
func (b *bench) parallel(ctx context.Context, n int, fn func(ctx context.Context, c *kubernetes.Clientset, i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for _, c := range b.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(ctx, c, i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func readyStatus() v1.NodeStatus {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")}
	now := metav1.Now()
	return v1.NodeStatus{
		Capacity: rl, Allocatable: rl,
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "schedbench fake kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}},
		NodeInfo:   v1.NodeSystemInfo{KubeletVersion: "v1.35.0", OperatingSystem: "linux", Architecture: "amd64"},
	}
}

// setUpNodes creates each node, posts its Ready status and creates its
// lease.
func (b *bench) setUpNodes(ctx context.Context) error {
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", leaseNS, err)
	}
	start := time.Now()
	err := b.parallel(ctx, len(b.nodeNames), func(ctx context.Context, c *kubernetes.Clientset, i int) error {
		name := b.nodeNames[i]
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			benchLabel: b.run, v1.LabelHostname: name, v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64",
			v1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3),
		}}}
		n, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		// Node IPAM writes new nodes too (their podCIDR).
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n.Status = readyStatus()
			_, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				if cur, gerr := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); gerr == nil {
					n = cur
				}
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("node %s status: %w", name, err)
		}
		return b.renewLease(ctx, c, name)
	})
	if err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Printf("nodes     %6d created, Ready and leased in %v (%.0f nodes/s)\n", len(b.nodeNames), d.Round(time.Millisecond), float64(len(b.nodeNames))/d.Seconds())
	return nil
}

func (b *bench) renewLease(ctx context.Context, c *kubernetes.Clientset, node string) error {
	leases := c.CoordinationV1().Leases(leaseNS)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		dur := int32(40)
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{benchLabel: b.run}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &dur, RenewTime: &now}}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return wrap(err, "create lease %s", node)
	}
	if err != nil {
		return fmt.Errorf("get lease %s: %w", node, err)
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return wrap(err, "renew lease %s", node)
}

func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// keepReady renews the leases and re-posts the Ready condition as
// kubelets do, until stop is closed or ctx ends. Failures are reported,
// not fatal: a node going NotReady shows up in the results.
func (b *bench) keepReady(ctx context.Context, stop <-chan struct{}) {
	leaseTick := time.NewTicker(b.o.leaseInterval)
	defer leaseTick.Stop()
	statusTick := time.NewTicker(b.o.statusInterval)
	defer statusTick.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-leaseTick.C:
			err = b.parallel(ctx, len(b.nodeNames), func(ctx context.Context, c *kubernetes.Clientset, i int) error {
				return b.renewLease(ctx, c, b.nodeNames[i])
			})
		case <-statusTick.C:
			err = b.parallel(ctx, len(b.nodeNames), func(ctx context.Context, c *kubernetes.Clientset, i int) error {
				n, err := c.CoreV1().Nodes().Get(ctx, b.nodeNames[i], metav1.GetOptions{})
				if err != nil {
					return err
				}
				n.Status.Conditions = readyStatus().Conditions
				_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
				return err
			})
		}
		if err != nil && ctx.Err() == nil {
			fmt.Printf("! keeping nodes ready: %v\n", err)
		}
	}
}

// waitSchedulable waits until no fake node carries a NoSchedule taint (a
// node lifecycle controller taints new nodes until it sees them Ready).
func (b *bench) waitSchedulable(ctx context.Context) error {
	deadline := time.Now().Add(b.o.readyTimeout)
	start := time.Now()
	for {
		list, err := b.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + b.run})
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		tainted := 0
		for _, n := range list.Items {
			if slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Effect != v1.TaintEffectPreferNoSchedule }) {
				tainted++
			}
		}
		if tainted == 0 {
			fmt.Printf("nodes     %6d schedulable after %v\n", len(list.Items), time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Printf("! %d of %d nodes still tainted after %v; going on\n", tainted, len(list.Items), b.o.readyTimeout)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (b *bench) pod(i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%06d", i), Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%50)}},
		Spec: v1.PodSpec{
			NodeSelector: map[string]string{benchLabel: b.run},
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(b.o.cpu), v1.ResourceMemory: resource.MustParse(b.o.memory)}}}},
		},
	}
}

// schedulePods creates the pods and reports how fast they were bound.
func (b *bench) schedulePods(ctx context.Context) error {
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.run}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", b.run, err)
	}
	created := make([]time.Time, b.o.pods)
	bound := make([]time.Time, b.o.pods)
	allBound := make(chan struct{})
	var mu sync.Mutex
	boundCount := 0
	record := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		var i int
		if _, err := fmt.Sscanf(p.Name, "pod-%d", &i); err != nil || i >= len(bound) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if bound[i].IsZero() {
			bound[i] = time.Now()
			if boundCount++; boundCount == len(bound) {
				close(allBound)
			}
		}
	}
	// An informer rather than a bare watch: servers cut off watchers that
	// fall behind, and the informer resumes where a watch would end.
	inf := informers.NewSharedInformerFactoryWithOptions(b.admin, 0, informers.WithNamespace(b.run)).Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, n any) { record(n) }}); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("watch pods: %w", ctx.Err())
	}
	start := time.Now()
	err := b.parallel(ctx, b.o.pods, func(ctx context.Context, c *kubernetes.Clientset, i int) error {
		created[i] = time.Now()
		_, err := c.CoreV1().Pods(b.run).Create(ctx, b.pod(i), metav1.CreateOptions{})
		return wrap(err, "create pod %d", i)
	})
	if err != nil {
		return err
	}
	createdIn := time.Since(start)
	fmt.Printf("pods      %6d created in %v (%.0f pods/s) by %d clients\n", b.o.pods, createdIn.Round(time.Millisecond), float64(b.o.pods)/createdIn.Seconds(), len(b.clients))
	select {
	case <-allBound:
	case <-ctx.Done():
		mu.Lock()
		n := boundCount
		mu.Unlock()
		return fmt.Errorf("%d of %d pods bound when giving up: %w", n, b.o.pods, ctx.Err())
	}
	elapsed := time.Since(start)
	lat := make([]time.Duration, b.o.pods)
	for i := range lat {
		lat[i] = bound[i].Sub(created[i])
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Millisecond) }
	fmt.Printf("scheduled %6d pods on %d nodes in %v: %.0f pods/s\n", b.o.pods, b.o.nodes, elapsed.Round(time.Millisecond), float64(b.o.pods)/elapsed.Seconds())
	fmt.Printf("latency   create→bound p50 %v  p90 %v  p99 %v  max %v\n", pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1].Round(time.Millisecond))
	return nil
}

// cleanup deletes what the run made, on its own deadline so that it also
// runs after ^C or a timeout.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	zero := int64(0)
	now := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	report := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Printf("! cleanup %s: %v\n", what, err)
		}
	}
	// Bound pods wait for a kubelet that does not exist unless deleted
	// with grace period 0, and the namespace would wait for them.
	// A -deployment run's owners go first, orphaning their pods, so that
	// nothing re-creates the pods deleted next.
	orphan := metav1.DeletePropagationOrphan
	report("deployments", b.admin.AppsV1().Deployments(b.run).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &orphan}, metav1.ListOptions{}))
	report("replicasets", b.admin.AppsV1().ReplicaSets(b.run).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &orphan}, metav1.ListOptions{}))
	report("pods", b.admin.CoreV1().Pods(b.run).DeleteCollection(ctx, now, metav1.ListOptions{}))
	report("namespace", b.admin.CoreV1().Namespaces().Delete(ctx, b.run, metav1.DeleteOptions{}))
	report("leases", b.admin.CoordinationV1().Leases(leaseNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: benchLabel + "=" + b.run}))
	err := b.parallel(ctx, len(b.nodeNames), func(ctx context.Context, c *kubernetes.Clientset, i int) error {
		if err := c.CoreV1().Nodes().Delete(ctx, b.nodeNames[i], metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	report("nodes", err)
	fmt.Printf("cleanup   done in %v\n", time.Since(start).Round(time.Millisecond))
}
