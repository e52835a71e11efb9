package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"skiff/server/controller/controllertest"
)

// The fake API server: the metadata fake's object tracker, plus reactors
// for what the collector relies on and the fake does not do: delete
// options (preconditions, propagation finalizers), merge patches with
// preconditions, and an update that removes the last finalizer of an
// object being deleted deleting it (as server/apiserver does).

var (
	podsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesGVR   = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	rsGVR      = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	deployGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

type fakeServer struct {
	t      *testing.T
	client *metadatafake.FakeMetadataClient
	disc   *lockedDiscovery

	mu     sync.Mutex
	rv     int
	hidden map[string]bool // names left out of lists and watches
}

// lockedDiscovery lets a test add resources while the collector reads
// discovery (the fake's Resources field is not guarded).
type lockedDiscovery struct {
	*discoveryfake.FakeDiscovery
	mu sync.Mutex
}

func (d *lockedDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerGroupsAndResources()
}

func (d *lockedDiscovery) addResources(l *metav1.APIResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Resources = append(d.Resources, l)
}

func newFakeServer(t *testing.T, objs ...*metav1.PartialObjectMetadata) *fakeServer {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, client: metadatafake.NewSimpleMetadataClient(scheme), hidden: map[string]bool{}}
	s.client.PrependReactor("delete", "*", s.delete)
	s.client.PrependReactor("patch", "*", s.patch)
	s.client.PrependReactor("list", "*", s.list)
	s.client.PrependWatchReactor("*", s.watch)
	s.disc = &lockedDiscovery{FakeDiscovery: &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	s.disc.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			apiResource("pods", "Pod", true, allVerbs...),
			apiResource("nodes", "Node", false, allVerbs...),
			apiResource("events", "Event", true, allVerbs...),
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			apiResource("replicasets", "ReplicaSet", true, allVerbs...),
			apiResource("deployments", "Deployment", true, allVerbs...),
		}},
		{GroupVersion: "authentication.k8s.io/v1", APIResources: []metav1.APIResource{
			apiResource("tokenreviews", "TokenReview", false, "create"),
		}},
	}
	for _, o := range objs {
		s.create(o)
	}
	return s
}

// obj makes an object of the fake; the UID is the name unless given.
func obj(apiVersion, kind, ns, name string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name), OwnerReferences: owners},
	}
}

func (s *fakeServer) create(o *metav1.PartialObjectMetadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	o = o.DeepCopy()
	o.ResourceVersion = strconv.Itoa(s.rv)
	if err := s.client.Tracker().Add(o); err != nil {
		s.t.Fatal(err)
	}
}

func (s *fakeServer) hide(name string, hidden bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hidden[name] = hidden
}

func (s *fakeServer) isHidden(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hidden[name]
}

// get reads the stored object, nil if there is none.
func (s *fakeServer) get(gvr schema.GroupVersionResource, ns, name string) *metav1.PartialObjectMetadata {
	o, err := s.client.Tracker().Get(gvr, ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return o.(*metav1.PartialObjectMetadata)
}

// store writes o back, deleting it instead if it was being deleted and
// has no finalizers left. The caller holds s.mu.
func (s *fakeServer) store(gvr schema.GroupVersionResource, o *metav1.PartialObjectMetadata) error {
	if o.DeletionTimestamp != nil && len(o.Finalizers) == 0 {
		return s.client.Tracker().Delete(gvr, o.Namespace, o.Name)
	}
	s.rv++
	o.ResourceVersion = strconv.Itoa(s.rv)
	return s.client.Tracker().Update(gvr, o, o.Namespace)
}

func conflict(gvr schema.GroupVersionResource, name string) error {
	return apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("precondition failed"))
}

func (s *fakeServer) delete(a clienttesting.Action) (bool, runtime.Object, error) {
	d := a.(clienttesting.DeleteActionImpl)
	gvr := a.GetResource()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.get(gvr, a.GetNamespace(), d.Name)
	if cur == nil {
		return true, nil, apierrors.NewNotFound(gvr.GroupResource(), d.Name)
	}
	if p := d.DeleteOptions.Preconditions; p != nil {
		if (p.UID != nil && *p.UID != cur.UID) || (p.ResourceVersion != nil && *p.ResourceVersion != cur.ResourceVersion) {
			return true, nil, conflict(gvr, d.Name)
		}
	}
	o := cur.DeepCopy()
	if p := d.DeleteOptions.PropagationPolicy; p != nil && *p != metav1.DeletePropagationBackground {
		add, drop := metav1.FinalizerDeleteDependents, metav1.FinalizerOrphanDependents
		if *p == metav1.DeletePropagationOrphan {
			add, drop = drop, add
		}
		o.Finalizers = slices.DeleteFunc(o.Finalizers, func(f string) bool { return f == drop || f == add })
		o.Finalizers = append(o.Finalizers, add)
	}
	if len(o.Finalizers) == 0 {
		return true, nil, s.client.Tracker().Delete(gvr, o.Namespace, o.Name)
	}
	if o.DeletionTimestamp == nil {
		now := metav1.Now()
		o.DeletionTimestamp = &now
	}
	return true, nil, s.store(gvr, o)
}

func (s *fakeServer) patch(a clienttesting.Action) (bool, runtime.Object, error) {
	p := a.(clienttesting.PatchActionImpl)
	gvr := a.GetResource()
	if p.PatchType != types.MergePatchType {
		return true, nil, apierrors.NewBadRequest("only merge patches are expected, got " + string(p.PatchType))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.get(gvr, a.GetNamespace(), p.Name)
	if cur == nil {
		return true, nil, apierrors.NewNotFound(gvr.GroupResource(), p.Name)
	}
	doc, _ := json.Marshal(cur)
	out, err := jsonpatch.MergePatch(doc, p.Patch)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	o := &metav1.PartialObjectMetadata{}
	if err := json.Unmarshal(out, o); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if o.UID != cur.UID || o.ResourceVersion != cur.ResourceVersion {
		return true, nil, conflict(gvr, p.Name)
	}
	return true, o, s.store(gvr, o)
}

func (s *fakeServer) list(a clienttesting.Action) (bool, runtime.Object, error) {
	_, out, err := clienttesting.ObjectReaction(s.client.Tracker())(a)
	if l, ok := out.(*metav1.List); ok {
		l.Items = slices.DeleteFunc(l.Items, func(r runtime.RawExtension) bool {
			m, ok := r.Object.(metav1.Object)
			return ok && s.isHidden(m.GetName())
		})
	}
	return true, out, err
}

func (s *fakeServer) watch(a clienttesting.Action) (bool, watch.Interface, error) {
	w, err := s.client.Tracker().Watch(a.GetResource(), a.GetNamespace(), a.(clienttesting.WatchActionImpl).ListOptions)
	if err != nil {
		return true, nil, err
	}
	return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		m, ok := e.Object.(metav1.Object)
		return e, !ok || !s.isHidden(m.GetName())
	}), nil
}

// actions lists the recorded calls of one verb on one object.
func (s *fakeServer) actions(verb string, gvr schema.GroupVersionResource, name string) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range s.client.Actions() {
		if a.GetVerb() != verb || a.GetResource() != gvr {
			continue
		}
		if n, ok := a.(interface{ GetName() string }); ok && n.GetName() == name {
			out = append(out, a)
		}
	}
	return out
}

// called reports whether any call of verb reached gvr.
func (s *fakeServer) called(verb string, gvr schema.GroupVersionResource) bool {
	for _, a := range s.client.Actions() {
		if a.GetVerb() == verb && a.GetResource() == gvr {
			return true
		}
	}
	return false
}

// deletePolicies lists the propagation policies the collector deleted
// an object with.
func (s *fakeServer) deletePolicies(gvr schema.GroupVersionResource, name string) []metav1.DeletionPropagation {
	var out []metav1.DeletionPropagation
	for _, a := range s.actions("delete", gvr, name) {
		if p := a.(clienttesting.DeleteActionImpl).DeleteOptions.PropagationPolicy; p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// start runs the collector against the fake until the test ends.
func (s *fakeServer) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(testWriter{s.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() {
		done <- Run(ctx, Config{Metadata: s.client, Discovery: s.disc, Logger: log, rediscover: 200 * time.Millisecond})
	}()
	s.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("Run: %v", err)
		}
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// eventually waits for cond, failing the test after a generous timeout
// (the race detector on a busy machine is slow).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	controllertest.Eventually(t, context.Background(), 20*time.Second, func(context.Context) (bool, error) { return cond(), nil }, "%s", what)
}
