package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// reconcileDeployment creates one Deployment of -pods replicas and reports
// how long the control loops take from its creation until every replica is
// bound: ReplicaSet creation, pod creation in slow-start batches, and
// scheduling, all through the API.
func (b *bench) reconcileDeployment(ctx context.Context) error {
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.run}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", b.run, err)
	}
	var mu sync.Mutex
	seen := map[string]time.Time{}
	boundAt := map[string]time.Time{}
	allBound := make(chan struct{})
	record := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[p.Name]; !ok {
			seen[p.Name] = time.Now()
		}
		if p.Spec.NodeName == "" || !boundAt[p.Name].IsZero() {
			return
		}
		boundAt[p.Name] = time.Now()
		if len(boundAt) == b.o.pods {
			close(allBound)
		}
	}
	inf := informers.NewSharedInformerFactoryWithOptions(b.admin, 0, informers.WithNamespace(b.run)).Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, n any) { record(n) }}); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("watch pods: %w", ctx.Err())
	}
	replicas := int32(b.o.pods)
	labels := map[string]string{"app": "schedbench"}
	tmpl := b.pod(0)
	tmpl.ObjectMeta = metav1.ObjectMeta{Labels: labels}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "schedbench"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec},
		},
	}
	start := time.Now()
	if _, err := b.admin.AppsV1().Deployments(b.run).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment: %w", err)
	}
	select {
	case <-allBound:
	case <-ctx.Done():
		mu.Lock()
		n := len(boundAt)
		mu.Unlock()
		return fmt.Errorf("%d of %d replicas bound when giving up: %w", n, b.o.pods, ctx.Err())
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	var firstSeen, lastSeen time.Time
	lat := make([]time.Duration, 0, len(boundAt))
	for name, at := range boundAt {
		s := seen[name]
		lat = append(lat, at.Sub(s))
		if firstSeen.IsZero() || s.Before(firstSeen) {
			firstSeen = s
		}
		if s.After(lastSeen) {
			lastSeen = s
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Millisecond) }
	fmt.Printf("deployment %d replicas on %d nodes: created→all bound %v (%.0f pods/s)\n", b.o.pods, b.o.nodes, elapsed.Round(time.Millisecond), float64(b.o.pods)/elapsed.Seconds())
	fmt.Printf("           first pod seen after %v, last pod seen after %v\n", firstSeen.Sub(start).Round(time.Millisecond), lastSeen.Sub(start).Round(time.Millisecond))
	fmt.Printf("latency    pod seen→bound p50 %v  p90 %v  p99 %v  max %v\n", pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1].Round(time.Millisecond))
	return nil
}
