package statefulset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

const ns = metav1.NamespaceDefault

// env is a real API server with the controller running against it. The
// test plays the kubelet: nothing else makes pods run.
type env struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	events *controllertest.Recorder
}

func start(t *testing.T) *env {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{ns}, Timeout: 45 * time.Second})
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: ce.Client, Informers: ce.Informers, Recorder: ce.Events, Logger: controllertest.Logger(t, slog.LevelInfo)})
	})
	return &env{t: t, ctx: ce.Ctx, client: ce.Client, events: ce.Events}
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	controllertest.Eventually(e.t, e.ctx, 30*time.Second, func(context.Context) (bool, error) { return cond(), nil }, "%s", what)
}

func statefulSet(name string, n int32) *appsv1.StatefulSet {
	lbls := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &n,
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "app:v1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

func (e *env) create(set *appsv1.StatefulSet) {
	e.t.Helper()
	_, err := e.client.AppsV1().StatefulSets(ns).Create(e.ctx, set, metav1.CreateOptions{})
	e.must(err)
}

func (e *env) set(name string) *appsv1.StatefulSet {
	e.t.Helper()
	set, err := e.client.AppsV1().StatefulSets(ns).Get(e.ctx, name, metav1.GetOptions{})
	e.must(err)
	return set
}

func (e *env) update(name string, change func(*appsv1.StatefulSet)) {
	e.t.Helper()
	set := e.set(name)
	change(set)
	_, err := e.client.AppsV1().StatefulSets(ns).Update(e.ctx, set, metav1.UpdateOptions{})
	e.must(err)
}

func (e *env) pod(name string) (*corev1.Pod, bool) {
	e.t.Helper()
	pod, err := e.client.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	e.must(err)
	return pod, true
}

// podNames lists the pods of set app, sorted.
func (e *env) podNames(app string) []string {
	e.t.Helper()
	pods, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	e.must(err)
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// ready plays the kubelet for one pod: it runs and passes its readiness
// probe.
func (e *env) ready(name string) {
	e.t.Helper()
	e.waitFor(name+" reported ready", func() bool {
		pod, ok := e.pod(name)
		if !ok {
			return false
		}
		if isRunningAndReady(pod) {
			return true
		}
		markReady(pod)
		_, err := e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{})
		return err == nil
	})
}

func markReady(pod *corev1.Pod) {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
}

// kubelet readies every pending pod, as a kubelet whose containers all
// start would.
func (e *env) kubelet() {
	go func() {
		for e.ctx.Err() == nil {
			pods, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
			if err == nil {
				for i := range pods.Items {
					if p := &pods.Items[i]; p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil {
						markReady(p)
						_, _ = e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{})
					}
				}
			}
			time.Sleep(20 * time.Millisecond) // a kubelet's sync period, not an assertion
		}
	}()
}

// history records pod events as "add web-0", "ready web-0", "delete web-0",
// in the order the API server serialized them.
type history struct {
	mu     sync.Mutex
	log    []string
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *env) watchPods() *history {
	e.t.Helper()
	list, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
	e.must(err)
	ctx, cancel := context.WithCancel(e.ctx)
	w, err := e.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	e.must(err)
	h := &history{cancel: cancel, done: make(chan struct{})}
	wasReady := map[types.UID]bool{}
	for _, p := range list.Items {
		wasReady[p.UID] = isRunningAndReady(&p)
	}
	go func() {
		defer close(h.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			var entry string
			switch {
			case ev.Type == watch.Added:
				entry = "add " + pod.Name
			case ev.Type == watch.Deleted:
				entry = "delete " + pod.Name
			case ev.Type == watch.Modified && isRunningAndReady(pod) && !wasReady[pod.UID]:
				entry = "ready " + pod.Name
			}
			wasReady[pod.UID] = isRunningAndReady(pod)
			if entry != "" {
				h.mu.Lock()
				h.log = append(h.log, entry)
				h.mu.Unlock()
			}
		}
	}()
	return h
}

func (h *history) stop() []string {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log
}

// inOrder reports whether want occur in log in that order.
func inOrder(log []string, want ...string) bool {
	i := 0
	for _, entry := range log {
		if i < len(want) && entry == want[i] {
			i++
		}
	}
	return i == len(want)
}

func (e *env) status(name string) appsv1.StatefulSetStatus {
	e.t.Helper()
	set := e.set(name)
	if set.Status.ObservedGeneration != set.Generation {
		return appsv1.StatefulSetStatus{}
	}
	return set.Status
}

func TestStatefulSet_OrderedReady_CreatesNextOnlyWhenReady(t *testing.T) {
	e := start(t)
	log := e.watchPods()
	e.create(statefulSet("web", 3))

	e.waitFor("web-0 counted in status", func() bool { return e.status("web").Replicas == 1 })
	if got := e.podNames("web"); !slices.Equal(got, []string{"web-0"}) {
		t.Fatalf("pods before web-0 is ready: %v", got)
	}
	pod, _ := e.pod("web-0")
	set := e.set("web")
	if pod.Spec.Hostname != "web-0" || pod.Spec.Subdomain != "web" {
		t.Errorf("hostname %q, subdomain %q", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if pod.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" || pod.Labels[appsv1.PodIndexLabel] != "0" || pod.Labels[appsv1.ControllerRevisionHashLabelKey] != set.Status.UpdateRevision {
		t.Errorf("labels %v; update revision %q", pod.Labels, set.Status.UpdateRevision)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != set.UID {
		t.Errorf("controller %v", ref)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Name != "data" || pod.Spec.Volumes[0].PersistentVolumeClaim == nil || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-web-0" {
		t.Errorf("volumes %+v", pod.Spec.Volumes)
	}

	e.ready("web-0")
	e.waitFor("web-1 counted in status", func() bool { return e.status("web").Replicas == 2 })
	if got := e.podNames("web"); !slices.Equal(got, []string{"web-0", "web-1"}) {
		t.Fatalf("pods before web-1 is ready: %v", got)
	}
	e.ready("web-1")
	e.waitFor("web-2", func() bool { _, ok := e.pod("web-2"); return ok })
	e.ready("web-2")
	e.waitFor("all ready", func() bool {
		s := e.status("web")
		return s.ReadyReplicas == 3 && s.AvailableReplicas == 3 && s.CurrentReplicas == 3 && s.UpdatedReplicas == 3 && s.CurrentRevision == s.UpdateRevision
	})
	if got := log.stop(); !inOrder(got, "add web-0", "ready web-0", "add web-1", "ready web-1", "add web-2") {
		t.Errorf("pod events out of order: %v", got)
	}
	for i := range 3 {
		claim, err := e.client.CoreV1().PersistentVolumeClaims(ns).Get(e.ctx, fmt.Sprintf("data-web-%d", i), metav1.GetOptions{})
		e.must(err)
		if claim.Labels["app"] != "web" || len(claim.OwnerReferences) != 0 {
			t.Errorf("claim %s: labels %v, owners %v", claim.Name, claim.Labels, claim.OwnerReferences)
		}
	}
	for _, want := range []string{
		"Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful",
		"Normal SuccessfulCreate create Claim data-web-0 Pod web-0 in StatefulSet web success",
		"Normal SuccessfulCreate create Pod web-2 in StatefulSet web successful",
	} {
		if !e.events.Has(want) {
			t.Errorf("no event %q in %v", want, e.events)
		}
	}
}

func TestStatefulSet_ScaleDown_RemovesHighestOrdinalFirst(t *testing.T) {
	e := start(t)
	e.kubelet()
	set := statefulSet("web", 3)
	set.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
	}
	e.create(set)
	e.waitFor("three ready", func() bool { return e.status("web").ReadyReplicas == 3 })
	log := e.watchPods()
	scale, err := e.client.AppsV1().StatefulSets(ns).GetScale(e.ctx, "web", metav1.GetOptions{})
	e.must(err)
	scale.Spec.Replicas = 1
	_, err = e.client.AppsV1().StatefulSets(ns).UpdateScale(e.ctx, "web", scale, metav1.UpdateOptions{})
	e.must(err)
	e.waitFor("one left", func() bool {
		return slices.Equal(e.podNames("web"), []string{"web-0"}) && e.status("web").Replicas == 1
	})
	if got := log.stop(); !inOrder(got, "delete web-2", "delete web-1") || slices.Contains(got, "delete web-0") {
		t.Errorf("pod events: %v", got)
	}
	if !e.events.Has("Normal SuccessfulDelete delete Pod web-2 in StatefulSet web successful") {
		t.Errorf("events %v", e.events)
	}
	// whenScaled: Delete hands a removed pod's claim to the pod (for the
	// garbage collector); a remaining pod's claim belongs to the set.
	set = e.set("web")
	for claim, owner := range map[string]string{"data-web-0": "StatefulSet/web", "data-web-1": "Pod/web-1", "data-web-2": "Pod/web-2"} {
		c, err := e.client.CoreV1().PersistentVolumeClaims(ns).Get(e.ctx, claim, metav1.GetOptions{})
		e.must(err)
		if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Kind+"/"+c.OwnerReferences[0].Name != owner {
			t.Errorf("claim %s owners %+v, want %s", claim, c.OwnerReferences, owner)
		}
	}
}

// podsAt reports whether the pods of app are exactly names, each ready and
// labelled with revision.
func (e *env) podsAt(revision string, names ...string) bool {
	for _, n := range names {
		pod, ok := e.pod(n)
		if !ok || pod.DeletionTimestamp != nil || !isRunningAndReady(pod) || podRevision(pod) != revision {
			return false
		}
	}
	return true
}

func TestStatefulSet_PartitionedRollingUpdate_KeepsOrdinalsBelowPartition(t *testing.T) {
	e := start(t)
	e.kubelet()
	e.create(statefulSet("web", 3))
	e.waitFor("three ready", func() bool { return e.status("web").ReadyReplicas == 3 })
	rev1 := e.status("web").UpdateRevision

	log := e.watchPods()
	e.update("web", func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "app:v2"
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(int32(1))}
	})
	var rev2 string
	e.waitFor("web-1 and web-2 updated", func() bool {
		s := e.status("web")
		rev2 = s.UpdateRevision
		return rev2 != rev1 && s.UpdatedReplicas == 2 && s.CurrentReplicas == 1 && s.ReadyReplicas == 3 && s.CurrentRevision == rev1 &&
			e.podsAt(rev2, "web-1", "web-2")
	})
	if !e.podsAt(rev1, "web-0") {
		t.Errorf("web-0 left the old revision")
	}
	pod, _ := e.pod("web-2")
	if img := pod.Spec.Containers[0].Image; img != "app:v2" {
		t.Errorf("updated pod runs %s", img)
	}
	if got := log.stop(); !inOrder(got, "delete web-2", "add web-2", "ready web-2", "delete web-1", "add web-1", "ready web-1") || slices.Contains(got, "delete web-0") {
		t.Errorf("pod events: %v", got)
	}

	e.update("web", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = new(int32(0)) })
	e.waitFor("the update to complete", func() bool {
		s := e.status("web")
		return s.CurrentRevision == rev2 && s.CurrentReplicas == 3 && s.UpdatedReplicas == 3 && e.podsAt(rev2, "web-0", "web-1", "web-2")
	})

	// kubectl rollout undo: the old revision's data as a strategic merge
	// patch makes the old template current again.
	old, err := e.client.AppsV1().ControllerRevisions(ns).Get(e.ctx, rev1, metav1.GetOptions{})
	e.must(err)
	_, err = e.client.AppsV1().StatefulSets(ns).Patch(e.ctx, "web", types.StrategicMergePatchType, old.Data.Raw, metav1.PatchOptions{})
	e.must(err)
	e.waitFor("the rollback to complete", func() bool {
		s := e.status("web")
		return s.UpdateRevision == rev1 && s.CurrentRevision == rev1 && e.podsAt(rev1, "web-0", "web-1", "web-2")
	})
	old, err = e.client.AppsV1().ControllerRevisions(ns).Get(e.ctx, rev1, metav1.GetOptions{})
	e.must(err)
	if old.Revision != 3 {
		t.Errorf("the restored revision is number %d, want 3", old.Revision)
	}
	if img := e.set("web").Spec.Template.Spec.Containers[0].Image; img != "app:v1" {
		t.Errorf("template image after undo = %s", img)
	}
}

func TestStatefulSet_Parallel_CreatesAllAtOnceAndRecreatesFailedPods(t *testing.T) {
	e := start(t)
	set := statefulSet("web", 3)
	set.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	e.create(set)
	db := statefulSet("db", 2)
	db.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	db.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
	e.create(db)

	// No pod is ready: nothing but Parallel would create them all.
	e.waitFor("all pods without any ready", func() bool {
		s := e.status("web")
		return s.Replicas == 3 && s.ReadyReplicas == 0 && slices.Equal(e.podNames("web"), []string{"web-0", "web-1", "web-2"})
	})
	e.waitFor("db numbered from 5", func() bool { return slices.Equal(e.podNames("db"), []string{"db-5", "db-6"}) })
	pod, _ := e.pod("db-6")
	if pod.Labels[appsv1.PodIndexLabel] != "6" || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-db-6" {
		t.Errorf("db-6: labels %v, volumes %+v", pod.Labels, pod.Spec.Volumes)
	}

	failed, _ := e.pod("web-1")
	failed.Status.Phase = corev1.PodFailed
	_, err := e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, failed, metav1.UpdateOptions{})
	e.must(err)
	e.waitFor("web-1 recreated", func() bool {
		pod, ok := e.pod("web-1")
		return ok && pod.UID != failed.UID && pod.Status.Phase == corev1.PodPending
	})
	if !e.events.Has("Warning RecreatingFailedPod StatefulSet default/web is recreating failed Pod web-1") {
		t.Errorf("events %v", e.events)
	}
}

// The kubelet refuses a pod whose host port another pod holds: the pod
// goes Failed before it ever ran. An OrderedReady set must replace it
// each time, and run once the port is free.
func TestStatefulSet_OrderedReady_PodRejectedByKubelet_RecreatedUntilRunning(t *testing.T) {
	e := start(t)
	e.create(statefulSet("ss", 1))
	seen := map[string]bool{}
	for range 3 {
		var pod *corev1.Pod
		e.waitFor("a new ss-0", func() bool {
			p, ok := e.pod("ss-0")
			if ok && !seen[string(p.UID)] && p.DeletionTimestamp == nil {
				pod = p
				return true
			}
			return false
		})
		seen[string(pod.UID)] = true
		pod.Status.Phase, pod.Status.Reason = corev1.PodFailed, "NodePorts"
		_, err := e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{})
		e.must(err)
	}
	e.waitFor("a fourth ss-0", func() bool {
		p, ok := e.pod("ss-0")
		return ok && !seen[string(p.UID)] && p.DeletionTimestamp == nil
	})
	e.ready("ss-0")
	e.waitFor("ss ready", func() bool { return e.status("ss").ReadyReplicas == 1 })
}
