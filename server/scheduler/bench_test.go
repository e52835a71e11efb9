package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/apiserver/apitest"
)

// BenchmarkScheduling measures pods/s and create→bound latency against a
// real in-process API server, a whole cluster per iteration, so run it
// once:
//
//	go test -run '^$' -bench Scheduling -benchtime 1x ./server/scheduler/
//
// mode=stream creates pods as fast as 16 clients can while the scheduler
// runs and measures create→bound latency; on a small machine the creates
// and the bindings compete for the same CPUs, so a backlog builds up and
// the latency mostly measures it. mode=stream@N paces creation at N pods/s
// to show the latency at a sustainable load. mode=backlog creates every pod first, then starts the
// scheduler and measures how fast it drains them (upstream's
// scheduler_perf measures this way). Events go through a real broadcaster
// to the API server, as in skiff server, except in the events=discard case.
func BenchmarkScheduling(b *testing.B) {
	cases := []benchCase{
		{nodes: 1000, pods: 10000, events: true},
		{nodes: 1000, pods: 10000, events: true, rate: 500},
		{nodes: 1000, pods: 10000, events: true, backlog: true},
		{nodes: 1000, pods: 10000, events: true, backlog: true, proto: true},
		{nodes: 1000, pods: 10000, backlog: true},
		{nodes: 5000, pods: 10000, events: true},
		{nodes: 5000, pods: 10000, events: true, backlog: true},
	}
	for _, tc := range cases {
		ev, mode, wire := "api", "stream", "json"
		if !tc.events {
			ev = "discard"
		}
		if tc.rate > 0 {
			mode = fmt.Sprintf("stream@%d", tc.rate)
		}
		if tc.backlog {
			mode = "backlog"
		}
		if tc.proto {
			wire = "proto"
		}
		b.Run(fmt.Sprintf("nodes=%d/pods=%d/mode=%s/events=%s/wire=%s", tc.nodes, tc.pods, mode, ev, wire), func(b *testing.B) {
			for range b.N {
				benchCluster(b, tc)
			}
		})
	}
}

func benchNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name, v1.LabelTopologyZone: fmt.Sprintf("zone-%d", len(name)%3)}}}
}

func benchNodeStatus(n *v1.Node) {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("32"), v1.ResourceMemory: resource.MustParse("128Gi"), v1.ResourcePods: resource.MustParse("110")}
	n.Status = v1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}}
}

func benchPod(i int) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: "bench", Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%50)}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.example/app:v1", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}}}}}}
}

// parallel runs fn(0..n-1) on workers goroutines, stopping at the first
// error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// benchCase is one cluster size and way of running. proto makes the
// clients (scheduler and benchmark) talk protobuf, as skiff's in-process
// clients could; rate paces pod creation (pods/s, 0 unpaced).
type benchCase struct {
	nodes, pods            int
	backlog, events, proto bool
	rate                   int
}

func benchCluster(b *testing.B, tc benchCase) {
	b.StopTimer()
	srv := apitest.Start(b, apitest.Options{Logger: slog.New(slog.DiscardHandler)})
	cfg := srv.Config(nil)
	if tc.proto {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createNodes(ctx, b, client, tc.nodes)
	created := make([]time.Time, tc.pods)
	createPods := func() time.Duration {
		t := time.Now()
		err := parallel(tc.pods, 16, func(i int) error {
			if tc.rate > 0 {
				time.Sleep(time.Until(t.Add(time.Duration(i) * time.Second / time.Duration(tc.rate))))
			}
			created[i] = time.Now()
			_, err := client.CoreV1().Pods("bench").Create(ctx, benchPod(i), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(t)
	}
	var createdIn time.Duration
	if tc.backlog {
		createdIn = createPods()
	}
	bound := make([]time.Time, tc.pods)
	allBound := watchBound(ctx, b, client, bound)
	// A FakeRecorder without a channel drops events.
	var recorder record.EventRecorder = &record.FakeRecorder{}
	if tc.events {
		bc := record.NewBroadcaster(record.WithContext(ctx))
		defer bc.Shutdown()
		bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		recorder = bc.NewRecorder(scheme.Scheme, v1.EventSource{Component: v1.DefaultSchedulerName})
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	done := make(chan error, 1)
	b.StartTimer()
	t0 := time.Now()
	go func() {
		done <- Run(ctx, Config{Client: client, Informers: factory, Recorder: recorder, Logger: slog.New(slog.DiscardHandler)})
	}()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	if !tc.backlog {
		createdIn = createPods()
	}
	select {
	case <-allBound:
	case <-time.After(10 * time.Minute):
		b.Fatal("pods not all bound within 10 minutes")
	}
	b.StopTimer()
	report(b, tc, time.Since(t0), createdIn, created, bound)
}

// createNodes makes the bench namespace and n Ready nodes.
func createNodes(ctx context.Context, b *testing.B, client kubernetes.Interface, n int) {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	start := time.Now()
	err = parallel(n, 32, func(i int) error {
		node, err := client.CoreV1().Nodes().Create(ctx, benchNode(fmt.Sprintf("node-%05d", i)), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		benchNodeStatus(node)
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d nodes created in %v", n, time.Since(start).Round(time.Millisecond))
}

func report(b *testing.B, tc benchCase, elapsed, createdIn time.Duration, created, bound []time.Time) {
	rate := float64(tc.pods) / elapsed.Seconds()
	b.ReportMetric(rate, "pods/s")
	if tc.backlog {
		byTime := func(x, y time.Time) int { return x.Compare(y) }
		first, last := slices.MinFunc(bound, byTime), slices.MaxFunc(bound, byTime)
		b.Logf("%d nodes, %d pods created beforehand in %v; scheduler started and bound them all in %v: %.0f pods/s (%.0f pods/s from the first binding on)",
			tc.nodes, tc.pods, createdIn.Round(time.Millisecond), elapsed.Round(time.Millisecond), rate, float64(tc.pods-1)/last.Sub(first).Seconds())
		return
	}
	lat := make([]time.Duration, tc.pods)
	for i := range lat {
		lat[i] = bound[i].Sub(created[i])
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Millisecond) }
	b.ReportMetric(float64(pct(0.50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99-ms")
	b.Logf("%d nodes, %d pods: created in %v, all bound after %v: %.0f pods/s; create→bound p50 %v p90 %v p99 %v max %v",
		tc.nodes, tc.pods, createdIn.Round(time.Millisecond), elapsed.Round(time.Millisecond), rate, pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1].Round(time.Millisecond))
}

// watchBound records when each pod is first seen bound and closes the
// returned channel when all are. An informer rather than a bare watch: the
// API server cuts off watchers that fall 1024 events behind, and the
// informer resumes where a watch would just end.
func watchBound(ctx context.Context, b *testing.B, client kubernetes.Interface, bound []time.Time) <-chan struct{} {
	allBound := make(chan struct{})
	var mu sync.Mutex
	seen := 0
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
		if !bound[i].IsZero() {
			return
		}
		bound[i] = time.Now()
		if seen++; seen == len(bound) {
			close(allBound)
		}
	}
	inf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("bench")).Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, n any) { record(n) }}); err != nil {
		b.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("pod informer did not sync")
	}
	return allBound
}
