package crd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	kubeversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
	"skiff/server/crd/conversion"
	"skiff/server/registry"
	"skiff/server/webhook"
)

// GVR is the resource of CustomResourceDefinitions.
var GVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ResourceCache is the watch cache the rows of custom resources join.
type ResourceCache interface {
	AddResource(ctx context.Context, res *registry.Resource) error
	RemoveResource(res *registry.Resource)
}

// Config is what the manager needs.
type Config struct {
	Registry *registry.Registry
	Cache    ResourceCache
	// Client reaches the API server in-process with the API server's own
	// identity: it writes CRD status and deletes the objects of a CRD
	// being deleted.
	Client dynamic.Interface
	// Webhooks calls conversion webhooks (nil: CRDs with Webhook
	// conversion are not served).
	Webhooks *webhook.Client
	// ApplyTypes builds the server-side apply schema of a CRD version.
	ApplyTypes func(crd *apiextensionsv1.CustomResourceDefinition, version string) (managedfields.TypeConverter, error)
	// Changed is told the established CRDs whenever the set or one of them
	// changes (OpenAPI, local APIServices).
	Changed []func(crds []*apiextensionsv1.CustomResourceDefinition)
	Logger  *slog.Logger
}

// Manager serves CRDs and keeps their status.
type Manager struct {
	cfg      Config
	queue    *worker.Queue
	informer cache.SharedIndexInformer

	mu     sync.Mutex
	served map[string][]*registry.Resource // by CRD name
}

// New makes a manager; Run starts it.
func New(cfg Config) (*Manager, error) {
	if cfg.Registry == nil || cfg.Cache == nil || cfg.Client == nil {
		return nil, errors.New("crd: Registry, Cache and Client are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, served: map[string][]*registry.Resource{}}
	m.queue = worker.New(worker.Config{Name: "crd", Log: cfg.Logger, Message: "syncing CustomResourceDefinition", Noun: "crd",
		Quiet: apierrors.IsConflict})
	m.informer = dynamicinformer.NewFilteredDynamicInformer(cfg.Client, GVR, "", 0, cache.Indexers{}, nil).Informer()
	return m, nil
}

// Run serves CRDs until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	_, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.enqueueGroup,
		UpdateFunc: func(_, obj any) { m.enqueueGroup(obj) },
		DeleteFunc: m.enqueueGroup,
	})
	if err != nil {
		return fmt.Errorf("crd: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { m.informer.RunWithContext(ctx) })
	defer wg.Wait()
	if !cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced) {
		return ctx.Err()
	}
	m.queue.Run(ctx, 2, m.sync)
	return nil
}

// enqueueGroup queues a CRD and every other CRD of its group: a change of
// one's names can free or take names another waits for.
func (m *Manager) enqueueGroup(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	m.queue.Add(u.GetName())
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	for _, o := range m.informer.GetStore().List() {
		if ou, ok := o.(*unstructured.Unstructured); ok && ou.GetName() != u.GetName() {
			if g, _, _ := unstructured.NestedString(ou.Object, "spec", "group"); g == group {
				m.queue.Add(ou.GetName())
			}
		}
	}
}

func toCRD(obj any) (*apiextensionsv1.CustomResourceDefinition, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("crd: informer object is %T", obj)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
		return nil, fmt.Errorf("crd %s: %w", u.GetName(), err)
	}
	return crd, nil
}

func (m *Manager) all() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, o := range m.informer.GetStore().List() {
		if crd, err := toCRD(o); err == nil {
			out = append(out, crd)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m *Manager) sync(ctx context.Context, name string) error {
	obj, exists, err := m.informer.GetStore().GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		m.unserve(name)
		m.publish()
		return nil
	}
	crd, err := toCRD(obj)
	if err != nil {
		return err
	}
	if crd.DeletionTimestamp != nil {
		return m.finalize(ctx, crd)
	}
	want := crd.DeepCopy()
	names, namesCond := acceptNames(crd, m.all())
	want.Status.AcceptedNames = names
	setCondition(want, namesCond)
	switch {
	case namesCond.Status == apiextensionsv1.ConditionTrue:
		setCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
			Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"})
	case condition(want, apiextensionsv1.Established) == nil:
		setCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established,
			Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"})
	}
	if sv, ok := StorageVersion(want); ok && !slices.Contains(want.Status.StoredVersions, sv) {
		want.Status.StoredVersions = append(want.Status.StoredVersions, sv)
	}
	if !apiequality.Semantic.DeepEqual(want.Status, crd.Status) {
		return m.updateStatus(ctx, want) // the update comes back as an event
	}
	if isTrue(crd, apiextensionsv1.Established) {
		if err := m.serve(ctx, crd); err != nil {
			m.cfg.Logger.Error("cannot serve CustomResourceDefinition", "crd", crd.Name, "err", err)
		}
	}
	m.publish()
	return nil
}

func (m *Manager) updateStatus(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(GVR.GroupVersion().WithKind("CustomResourceDefinition"))
	_, err = m.cfg.Client.Resource(GVR).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	return err
}

// serve puts the CRD's rows in the registry and the watch cache, and takes
// out the rows of versions it no longer serves.
func (m *Manager) serve(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	var conv conversion.Converter
	if len(crd.Spec.Versions) > 1 {
		var err error
		if conv, err = conversion.New(crd, m.cfg.Webhooks); err != nil {
			return err
		}
	}
	rows, err := Rows(crd, Deps{Converter: conv, ApplyTypes: m.cfg.ApplyTypes})
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := map[schema.GroupVersionResource]bool{}
	for _, res := range rows {
		// Registry first: a cache that is still syncing picks the row up
		// from the registry when it ends (storage.Cache.AddResource).
		if err := m.cfg.Registry.Put(res); err != nil {
			return err
		}
		if err := m.cfg.Cache.AddResource(ctx, res); err != nil {
			return err
		}
		keep[res.GVR()] = true
	}
	for _, old := range m.served[crd.Name] {
		if !keep[old.GVR()] {
			m.cfg.Registry.Remove(old.GVR())
			m.cfg.Cache.RemoveResource(old)
		}
	}
	m.served[crd.Name] = rows
	if v := preferredVersion(crd); v != "" {
		m.cfg.Registry.SetPreferred(crd.Spec.Group, v)
	}
	return nil
}

// preferredVersion is the served version discovery prefers: the highest
// by Kubernetes' version ordering (v2 > v1 > v1beta2 > v1alpha1), as
// upstream sorts a CRD's versions.
func preferredVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	best := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && (best == "" || kubeversion.CompareKubeAwareVersionStrings(v.Name, best) > 0) {
			best = v.Name
		}
	}
	return best
}

// unserve removes every row of a CRD.
func (m *Manager) unserve(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, res := range m.served[name] {
		m.cfg.Registry.Remove(res.GVR())
		m.cfg.Cache.RemoveResource(res)
	}
	delete(m.served, name)
}

// publish tells the listeners the established CRDs.
func (m *Manager) publish() {
	if len(m.cfg.Changed) == 0 {
		return
	}
	var est []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range m.all() {
		if crd.DeletionTimestamp == nil && isTrue(crd, apiextensionsv1.Established) {
			est = append(est, crd)
		}
	}
	for _, fn := range m.cfg.Changed {
		fn(est)
	}
}

// retryAfter is how soon a CRD being deleted is looked at again while its
// objects go.
const retryAfter = time.Second
