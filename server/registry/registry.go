// Package registry is the table of API resources the API server serves. Every
// REST path is driven by one row: adding a resource is adding a row, and
// CustomResourceDefinitions add rows at run time.
package registry

import (
	"context"
	"fmt"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource describes one served resource.
type Resource struct {
	Group, Version string
	// Name is the plural resource name in URLs (pods).
	Name     string
	Singular string
	Kind     string
	ListKind string
	// Namespaced resources live under /namespaces/<ns>/.
	Namespaced bool
	ShortNames []string
	Categories []string
	// New and NewList make empty typed objects.
	New     func() runtime.Object
	NewList func() runtime.Object
	// Status means the resource has a status subresource: writes to the main
	// resource keep the stored status, writes to /status keep the spec (and
	// the metadata StatusKeeps names).
	Status bool
	// StatusKeeps lists the metadata fields (labels, annotations,
	// finalizers, ownerReferences) a write to /status keeps as stored. The
	// rest of metadata comes from the request and spec never does: most of
	// upstream's status strategies reset only spec, a few also these.
	StatusKeeps []string
	// Scale means the resource has a scale subresource over spec.replicas.
	Scale bool
	// Generation means metadata.generation counts changes to the spec.
	Generation bool
	// Verbs the resource supports (discovery reports them).
	Verbs []string
	// Default sets defaults on a typed object (nil: none).
	Default func(obj runtime.Object)
	// Validate checks a new object; ValidateUpdate an update (nil: none).
	Validate       func(obj runtime.Object) field.ErrorList
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// ValidateSubresource checks a write through a subresource with rules
	// of its own (pods/ephemeralcontainers, pods/resize); ok false means
	// ValidateUpdate applies (nil: always ValidateUpdate).
	ValidateSubresource func(subresource string, obj, old runtime.Object) (errs field.ErrorList, ok bool)
	// Fields returns the resource's extra field-selector fields (beyond
	// metadata.name and metadata.namespace) for an object (nil: none).
	Fields func(obj runtime.Object) map[string]string
	// Convert, when set, means this row serves objects stored by another
	// version of the same group and resource (autoscaling/v1 over v2): the
	// store keys are shared and every read and write goes through it.
	Convert *Conversion
	// Compute, when set, makes the resource computed, not stored: get and
	// list answer with what it returns at the time of the request.
	Compute func(ctx context.Context) ([]runtime.Object, error)

	// Custom marks a custom resource (a CustomResourceDefinition's row):
	// its objects are *unstructured.Unstructured, served as JSON only (no
	// protobuf), and strategic merge patch is refused as upstream does.
	Custom bool
	// Prune, when set, removes the fields the resource's schema does not
	// declare from a decoded object and returns their paths, which
	// fieldValidation Strict refuses and Warn reports.
	Prune func(obj runtime.Object) []string
	// ScaleHooks, when set, is how the scale subresource reads and writes
	// the replicas of an object whose layout the server does not know.
	ScaleHooks *ScaleHooks
	// Table, when set, prints the resource's objects for kubectl get.
	Table *Table
	// BeforeDelete, when set, changes an object about to be deleted (in
	// place): a CustomResourceDefinition gets the finalizer that deletes
	// its objects first.
	BeforeDelete func(obj runtime.Object)
	// ApplyTypes, when set, is the schema server-side apply merges objects
	// of the resource by (built-ins use the scheme's).
	ApplyTypes managedfields.TypeConverter
}

// ScaleHooks read and write the scale subresource of a resource.
type ScaleHooks struct {
	// Get returns the desired and observed replicas and the selector.
	Get func(obj runtime.Object) (spec, status int32, selector string, err error)
	// Set writes the desired replicas.
	Set func(obj runtime.Object, replicas int32) error
}

// Table prints the objects of one resource as rows of a metav1.Table.
type Table struct {
	Columns []metav1.TableColumnDefinition
	// Cells returns one object's cells, in Columns order.
	Cells func(obj runtime.Object) ([]any, error)
}

// Conversion translates between a row's type and the type of the version
// its objects are stored in.
type Conversion struct {
	// StorageVersion is the version whose encoding is in the store.
	StorageVersion string
	// StorageGroup, when set, is the group whose objects these are, when
	// not the row's own: events.k8s.io/v1 Events are core/v1 Events.
	StorageGroup *string
	// NewStored makes an empty object of the storage version.
	NewStored func() runtime.Object
	// ToStorage and FromStorage convert a whole object, metadata included;
	// neither may change its argument.
	ToStorage   func(obj runtime.Object) (runtime.Object, error)
	FromStorage func(stored runtime.Object) (runtime.Object, error)
}

// StorageGVK is the group, version and kind written to the store: the
// storage version's for a converted row.
func (r *Resource) StorageGVK() schema.GroupVersionKind {
	if r.Convert != nil {
		return schema.GroupVersionKind{Group: r.storageGroup(), Version: r.Convert.StorageVersion, Kind: r.Kind}
	}
	return r.GVK()
}

// storageGroup is the group whose store holds the resource's objects.
func (r *Resource) storageGroup() string {
	if r.Convert != nil && r.Convert.StorageGroup != nil {
		return *r.Convert.StorageGroup
	}
	return r.Group
}

// GVR is the resource's group, version and plural name.
func (r *Resource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Name}
}

// GVK is the group, version and kind of the resource's objects.
func (r *Resource) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// GroupVersion is "v1" for the core group, "group/version" otherwise.
func (r *Resource) GroupVersion() string {
	return r.GVK().GroupVersion().String()
}

// KeyPrefix is where the resource's objects live in the store:
// /registry/<group>/<resource>/ ("core" for the core group).
func (r *Resource) KeyPrefix() string {
	g := r.storageGroup()
	if g == "" {
		g = "core"
	}
	return "/registry/" + g + "/" + r.Name + "/"
}

// Key is the store key of one object; namespace is ignored for
// cluster-scoped resources.
func (r *Resource) Key(namespace, name string) string {
	if r.Namespaced {
		return r.KeyPrefix() + namespace + "/" + name
	}
	return r.KeyPrefix() + name
}

// ListPrefix is the store prefix of a list: every object, or those of one
// namespace.
func (r *Resource) ListPrefix(namespace string) string {
	if r.Namespaced && namespace != "" {
		return r.KeyPrefix() + namespace + "/"
	}
	return r.KeyPrefix()
}

// HasVerb reports whether the resource supports verb.
func (r *Resource) HasVerb(verb string) bool {
	for _, v := range r.Verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// Registry is the set of served resources; safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	byGVR     map[schema.GroupVersionResource]*Resource
	byGVK     map[schema.GroupVersionKind]*Resource
	preferred map[string]string // group -> preferred version
}

// New returns a registry holding the given resources.
func New(resources ...*Resource) (*Registry, error) {
	r := &Registry{
		byGVR:     map[schema.GroupVersionResource]*Resource{},
		byGVK:     map[schema.GroupVersionKind]*Resource{},
		preferred: map[string]string{},
	}
	for _, res := range resources {
		if err := r.Add(res); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add serves a resource; the first version added for a group is preferred.
func (r *Registry) Add(res *Resource) error {
	if res.Name == "" || res.Kind == "" || res.Version == "" || res.New == nil || res.NewList == nil {
		return fmt.Errorf("registry: incomplete resource %+v", res.GVR())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byGVR[res.GVR()]; dup {
		return fmt.Errorf("registry: %s already registered", res.GVR())
	}
	r.byGVR[res.GVR()] = res
	r.byGVK[res.GVK()] = res
	if _, ok := r.preferred[res.Group]; !ok {
		r.preferred[res.Group] = res.Version
	}
	return nil
}

// Put serves a resource, replacing the row of the same group, version and
// resource if there is one (a CustomResourceDefinition that changed).
func (r *Registry) Put(res *Resource) error {
	if res.Name == "" || res.Kind == "" || res.Version == "" || res.New == nil || res.NewList == nil {
		return fmt.Errorf("registry: incomplete resource %+v", res.GVR())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byGVR[res.GVR()]; ok {
		delete(r.byGVK, old.GVK())
	}
	r.byGVR[res.GVR()] = res
	r.byGVK[res.GVK()] = res
	if _, ok := r.preferred[res.Group]; !ok {
		r.preferred[res.Group] = res.Version
	}
	return nil
}

// SetPreferred makes version the one discovery reports as preferred for
// group (a CustomResourceDefinition orders its versions itself).
func (r *Registry) SetPreferred(group, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.preferred[group] = version
}

// Remove stops serving a resource (a deleted CustomResourceDefinition).
func (r *Registry) Remove(gvr schema.GroupVersionResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.byGVR[gvr]
	if !ok {
		return
	}
	delete(r.byGVR, gvr)
	delete(r.byGVK, res.GVK())
	for k := range r.byGVR {
		if k.Group == gvr.Group {
			if r.preferred[gvr.Group] == gvr.Version {
				r.preferred[gvr.Group] = k.Version
			}
			return
		}
	}
	delete(r.preferred, gvr.Group)
}

// Lookup finds a resource by group, version and plural name.
func (r *Registry) Lookup(group, version, name string) (*Resource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.byGVR[schema.GroupVersionResource{Group: group, Version: version, Resource: name}]
	return res, ok
}

// ForKind finds the resource serving a kind.
func (r *Registry) ForKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.byGVK[gvk]
	return res, ok
}

// All returns every resource, sorted by group, version and name.
func (r *Registry) All() []*Resource {
	r.mu.RLock()
	out := make([]*Resource, 0, len(r.byGVR))
	for _, res := range r.byGVR {
		out = append(out, res)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Name < b.Name
	})
	return out
}

// PreferredVersion is the version discovery reports as preferred for group.
func (r *Registry) PreferredVersion(group string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.preferred[group]
	return v, ok
}
