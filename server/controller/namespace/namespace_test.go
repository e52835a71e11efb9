package namespace

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	discoveryfake "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	configmaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	events      = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// graceAnnotation makes the fake server delete an object gracefully, as
// the real one does a pod on a node: it stays, with a deletionTimestamp
// that many seconds ahead.
const graceAnnotation = "test.skiff/grace-seconds"

type fixture struct {
	kube *kubefake.Clientset
	meta *metadatafake.FakeMetadataClient
	d    *deleter
}

func newFixture(t *testing.T, namespaces []runtime.Object, content ...runtime.Object) *fixture {
	t.Helper()
	kube := kubefake.NewClientset(namespaces...)
	kube.Discovery().(*discoveryfake.FakeDiscovery).Resources = apiResources()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := metadatafake.NewSimpleMetadataClient(scheme, content...)
	serverLikeDeletes(mc)
	cfg := Config{Client: kube, Metadata: mc, Discovery: kube.Discovery(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	return &fixture{kube: kube, meta: mc, d: &deleter{cfg: cfg, log: cfg.Logger}}
}

// apiResources is what discovery reports: deployments lack
// deletecollection so that list-and-delete is exercised, and cluster-scoped
// resources and subresources are there to be skipped.
func apiResources() []*metav1.APIResourceList {
	all := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "namespaces", Kind: "Namespace", Verbs: all},
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: all},
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: all},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "patch", "update"}},
			{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
			{Name: "events", Namespaced: true, Kind: "Event", Verbs: all},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: metav1.Verbs{"create", "delete", "get", "list", "watch"}},
		}},
	}
}

// serverLikeDeletes gives the metadata fake the server's delete semantics,
// which its object tracker lacks: objects with finalizers or a grace
// period stay with a deletionTimestamp, and deletecollection works.
func serverLikeDeletes(mc *metadatafake.FakeMetadataClient) {
	tr := mc.Tracker()
	del := func(gvr schema.GroupVersionResource, ns, name string) error {
		obj, err := tr.Get(gvr, ns, name)
		if err != nil {
			return err
		}
		m := obj.(*metav1.PartialObjectMetadata).DeepCopy()
		grace, _ := strconv.Atoi(m.Annotations[graceAnnotation])
		if len(m.Finalizers) == 0 && grace == 0 {
			return tr.Delete(gvr, ns, name)
		}
		if m.DeletionTimestamp == nil {
			at := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second))
			m.DeletionTimestamp = &at
			return tr.Update(gvr, m, ns)
		}
		return nil
	}
	mc.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		da := a.(clienttesting.DeleteActionImpl)
		return true, nil, del(da.Resource, da.Namespace, da.Name)
	})
	mc.PrependReactor("delete-collection", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		for _, m := range stored(tr, a.GetResource(), a.GetNamespace()) {
			if err := del(a.GetResource(), m.Namespace, m.Name); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
}

func stored(tr clienttesting.ObjectTracker, gvr schema.GroupVersionResource, ns string) []*metav1.PartialObjectMetadata {
	list, err := tr.List(gvr, schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1"}, ns)
	if err != nil {
		panic(err)
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		panic(err)
	}
	var out []*metav1.PartialObjectMetadata
	for _, o := range objs {
		out = append(out, o.(*metav1.PartialObjectMetadata))
	}
	return out
}

func terminating(name string) *corev1.Namespace {
	now := metav1.Now()
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
}

func object(apiVersion, kind, ns, name string, finalizers ...string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
	}
}

func (f *fixture) namespace(t *testing.T, name string) *corev1.Namespace {
	t.Helper()
	ns, err := f.kube.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func condition(ns *corev1.Namespace, t corev1.NamespaceConditionType) corev1.NamespaceCondition {
	for _, c := range ns.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NamespaceCondition{}
}

func finalized(ns *corev1.Namespace) bool { return len(ns.Spec.Finalizers) == 0 }

func TestEmptiesAndFinalizes(t *testing.T) {
	f := newFixture(t, []runtime.Object{terminating("doomed")},
		object("v1", "ConfigMap", "doomed", "a"), object("v1", "ConfigMap", "doomed", "b"),
		object("v1", "Pod", "doomed", "p"), object("v1", "Event", "doomed", "e"),
		object("apps/v1", "Deployment", "doomed", "d"),
		object("v1", "ConfigMap", "other", "keep"))
	if err := f.d.sync(context.Background(), "doomed"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	for _, gvr := range []schema.GroupVersionResource{configmaps, pods, events, deployments} {
		if left := stored(f.meta.Tracker(), gvr, "doomed"); len(left) != 0 {
			t.Errorf("%s left in doomed: %d", gvr.Resource, len(left))
		}
	}
	if left := stored(f.meta.Tracker(), configmaps, "other"); len(left) != 1 {
		t.Errorf("another namespace's config map was touched: %d left", len(left))
	}
	ns := f.namespace(t, "doomed")
	if !finalized(ns) {
		t.Errorf("spec.finalizers = %v, want none", ns.Spec.Finalizers)
	}
	for _, ct := range conditionTypes {
		if c := condition(ns, ct); c.Status != corev1.ConditionFalse || c.Reason != okReasons[ct] {
			t.Errorf("condition %s = %+v, want False/%s", ct, c, okReasons[ct])
		}
	}
	verbs := map[string]map[string]bool{}
	for _, a := range f.meta.Actions() {
		r := a.GetResource().Resource
		if verbs[r] == nil {
			verbs[r] = map[string]bool{}
		}
		verbs[r][a.GetVerb()] = true
	}
	if !verbs["configmaps"]["delete-collection"] || verbs["configmaps"]["delete"] {
		t.Errorf("config maps: verbs %v, want one deletecollection", verbs["configmaps"])
	}
	if verbs["deployments"]["delete-collection"] || !verbs["deployments"]["delete"] {
		t.Errorf("deployments (no deletecollection in discovery): verbs %v, want list and delete", verbs["deployments"])
	}
	for _, skipped := range []string{"namespaces", "bindings", "pods/status"} {
		if verbs[skipped] != nil {
			t.Errorf("%s touched: %v", skipped, verbs[skipped])
		}
	}
	var finalizes int
	for _, a := range f.kube.Actions() {
		if a.GetSubresource() == "finalize" {
			finalizes++
		}
	}
	if finalizes != 1 {
		t.Errorf("finalize calls = %d, want 1", finalizes)
	}
}

func TestFinalizerHoldsNamespace(t *testing.T) {
	f := newFixture(t, []runtime.Object{terminating("held")},
		object("v1", "ConfigMap", "held", "stuck", "example.com/hold"),
		object("v1", "ConfigMap", "held", "free"))
	var remaining *remainingError
	for range 2 { // a second, identical pass must not rewrite the status
		if err := f.d.sync(context.Background(), "held"); !errors.As(err, &remaining) {
			t.Fatalf("sync = %v, want remaining content", err)
		}
	}
	if remaining.estimate != waitEstimateSeconds {
		t.Errorf("estimate = %d, want %d", remaining.estimate, waitEstimateSeconds)
	}
	ns := f.namespace(t, "held")
	if finalized(ns) {
		t.Fatal("namespace finalized while content remains")
	}
	c := condition(ns, corev1.NamespaceContentRemaining)
	if c.Status != corev1.ConditionTrue || c.Reason != "SomeResourcesRemain" || c.Message != "Some resources are remaining: configmaps. has 1 resource instances" {
		t.Errorf("ContentRemaining = %+v", c)
	}
	c = condition(ns, corev1.NamespaceFinalizersRemaining)
	if c.Status != corev1.ConditionTrue || c.Reason != "SomeFinalizerRemain" || c.Message != "Some finalizers are remaining: example.com/hold in 1 resource instances" {
		t.Errorf("FinalizersRemaining = %+v", c)
	}
	if c := condition(ns, corev1.NamespaceDeletionContentFailure); c.Status != corev1.ConditionFalse {
		t.Errorf("ContentFailure = %+v, want False: a held object is not a failure", c)
	}
	if n := countStatusWrites(f.kube.Actions()); n != 1 {
		t.Errorf("status writes = %d, want 1", n)
	}

	// The finalizer's owner lets go; the next pass releases the namespace.
	if err := f.meta.Tracker().Delete(configmaps, "held", "stuck"); err != nil {
		t.Fatal(err)
	}
	if err := f.d.sync(context.Background(), "held"); err != nil {
		t.Fatalf("sync after release: %v", err)
	}
	ns = f.namespace(t, "held")
	if !finalized(ns) {
		t.Error("namespace not finalized once empty")
	}
	if c := condition(ns, corev1.NamespaceContentRemaining); c.Status != corev1.ConditionFalse || c.Message != "All content successfully removed" {
		t.Errorf("ContentRemaining after release = %+v", c)
	}
}

func countStatusWrites(actions []clienttesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestGracefulPodIsWaitedFor(t *testing.T) {
	pod := object("v1", "Pod", "busy", "web")
	pod.Annotations = map[string]string{graceAnnotation: "30"}
	f := newFixture(t, []runtime.Object{terminating("busy")}, pod)
	var remaining *remainingError
	if err := f.d.sync(context.Background(), "busy"); !errors.As(err, &remaining) {
		t.Fatalf("sync = %v, want remaining content", err)
	}
	if remaining.estimate < 29 || remaining.estimate > 31 {
		t.Errorf("estimate = %d, want about the pod's 30s grace period", remaining.estimate)
	}
	ns := f.namespace(t, "busy")
	if finalized(ns) {
		t.Error("namespace finalized while a pod terminates")
	}
	if c := condition(ns, corev1.NamespaceContentRemaining); c.Message != "Some resources are remaining: pods. has 1 resource instances" {
		t.Errorf("ContentRemaining = %+v", c)
	}
}

func TestLiveNamespaceLeftAlone(t *testing.T) {
	live := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	f := newFixture(t, []runtime.Object{live}, object("v1", "ConfigMap", "live", "cm"))
	if err := f.d.sync(context.Background(), "live"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if a := f.meta.Actions(); len(a) != 0 {
		t.Errorf("content actions on a live namespace: %v", a)
	}
	for _, a := range f.kube.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("unexpected action on a live namespace: %v", a)
		}
	}
	if ns := f.namespace(t, "live"); finalized(ns) || len(ns.Status.Conditions) != 0 {
		t.Errorf("live namespace changed: %+v", ns)
	}
}

// failDiscovery makes every group's resource discovery fail until ok is set.
func failDiscovery(kube *kubefake.Clientset, ok *atomic.Bool) {
	kube.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		if ok.Load() {
			return false, nil, nil
		}
		return true, nil, errors.New("discovery is down")
	})
}

func TestDiscoveryFailureReportedAndRetried(t *testing.T) {
	f := newFixture(t, []runtime.Object{terminating("blind")}, object("v1", "ConfigMap", "blind", "cm"))
	var ok atomic.Bool
	failDiscovery(f.kube, &ok)
	err := f.d.sync(context.Background(), "blind")
	var remaining *remainingError
	if err == nil || errors.As(err, &remaining) {
		t.Fatalf("sync = %v, want a discovery error to retry on", err)
	}
	ns := f.namespace(t, "blind")
	if finalized(ns) {
		t.Fatal("namespace finalized without knowing its content")
	}
	c := condition(ns, corev1.NamespaceDeletionDiscoveryFailure)
	if c.Status != corev1.ConditionTrue || c.Reason != "DiscoveryFailed" || !strings.HasPrefix(c.Message, "Discovery failed for some groups, 2 failing:") {
		t.Errorf("DiscoveryFailure = %+v", c)
	}

	ok.Store(true)
	if err := f.d.sync(context.Background(), "blind"); err != nil {
		t.Fatalf("sync once discovery works: %v", err)
	}
	ns = f.namespace(t, "blind")
	if !finalized(ns) {
		t.Error("namespace not finalized after discovery recovered")
	}
	if c := condition(ns, corev1.NamespaceDeletionDiscoveryFailure); c.Status != corev1.ConditionFalse || c.Reason != "ResourcesDiscovered" {
		t.Errorf("DiscoveryFailure after recovery = %+v", c)
	}
}

// TestRun drives the whole loop: informer, queue and the retry after a
// failed discovery.
func TestRun(t *testing.T) {
	live := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}}
	f := newFixture(t, []runtime.Object{terminating("doomed"), live},
		object("v1", "ConfigMap", "doomed", "cm"), object("v1", "ConfigMap", "live", "cm"))
	var calls atomic.Int32
	f.kube.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) <= 4 { // two passes' worth of failures for two groups
			return true, nil, errors.New("discovery is down")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, f.d.cfg, 0) }()
	deadline := time.Now().Add(10 * time.Second)
	for !finalized(f.namespace(t, "doomed")) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("doomed not finalized; conditions %+v", f.namespace(t, "doomed").Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
	if calls.Load() <= 4 {
		t.Errorf("discovery calls = %d: no retry after the failures", calls.Load())
	}
	if left := stored(f.meta.Tracker(), configmaps, "live"); len(left) != 1 {
		t.Error("live namespace's content was deleted")
	}
	if left := stored(f.meta.Tracker(), configmaps, "doomed"); len(left) != 0 {
		t.Error("doomed namespace's content was not deleted")
	}
}

func TestPodsRemain_OtherContentWaitsForThem(t *testing.T) {
	f := newFixture(t, []runtime.Object{terminating("ordered")},
		object("v1", "Pod", "ordered", "held", "example.com/hold"),
		object("v1", "ConfigMap", "ordered", "cm"),
		object("apps/v1", "Deployment", "ordered", "d"))
	var remaining *remainingError
	if err := f.d.sync(context.Background(), "ordered"); !errors.As(err, &remaining) {
		t.Fatalf("sync = %v, want remaining content", err)
	}
	podsLeft := stored(f.meta.Tracker(), pods, "ordered")
	if len(podsLeft) != 1 || podsLeft[0].DeletionTimestamp == nil {
		t.Fatalf("pods = %+v, want the held pod, being deleted", podsLeft)
	}
	for _, gvr := range []schema.GroupVersionResource{configmaps, deployments} {
		if left := stored(f.meta.Tracker(), gvr, "ordered"); len(left) != 1 {
			t.Errorf("%s deleted while a pod remains: %d left", gvr.Resource, len(left))
		}
	}
	for _, a := range f.meta.Actions() {
		if strings.HasPrefix(a.GetVerb(), "delete") && a.GetResource() != pods {
			t.Errorf("%s %s before the pods were gone", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if finalized(f.namespace(t, "ordered")) {
		t.Fatal("namespace finalized while a pod remains")
	}

	// The pod's finalizer is released: the rest goes and the namespace too.
	if err := f.meta.Tracker().Delete(pods, "ordered", "held"); err != nil {
		t.Fatal(err)
	}
	if err := f.d.sync(context.Background(), "ordered"); err != nil {
		t.Fatalf("sync once pods are gone: %v", err)
	}
	for _, gvr := range []schema.GroupVersionResource{configmaps, deployments} {
		if left := stored(f.meta.Tracker(), gvr, "ordered"); len(left) != 0 {
			t.Errorf("%s left after the pods went: %d", gvr.Resource, len(left))
		}
	}
	if !finalized(f.namespace(t, "ordered")) {
		t.Error("namespace not finalized once empty")
	}
}
