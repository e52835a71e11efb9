package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"skiff/server/registry"
)

// fieldManagers track managedFields on every write and perform server-side
// apply, with apimachinery's field manager over the structural schema that
// client-go ships for the built-in types. They are built on first use: the
// schema costs a few megabytes that a server not writing never spends.
type fieldManagers struct {
	scheme   *runtime.Scheme
	convert  runtime.ObjectConvertor // convertor.go
	once     sync.Once
	tc       managedfields.TypeConverter
	mu       sync.Mutex
	managers map[string]*managedfields.FieldManager
	customs  map[string]customManager
}

func newFieldManagers(scheme *runtime.Scheme, reg *registry.Registry) *fieldManagers {
	return &fieldManagers{scheme: scheme, convert: versionConvertor{scheme, reg}, managers: map[string]*managedfields.FieldManager{}}
}

// defaulter lets the field manager default applied objects as we do.
type defaulter func(runtime.Object)

func (d defaulter) Default(obj runtime.Object) {
	if d != nil {
		d(obj)
	}
}

// For returns the field manager of a resource's main resource or
// subresource ("" or "status"). Resources outside the scheme (custom
// resources, until they have their own) get none.
func (f *fieldManagers) For(res *registry.Resource, subresource string) (*managedfields.FieldManager, error) {
	if res.ApplyTypes != nil {
		return f.custom(res, subresource)
	}
	tc := f.typeConverter(res)
	if tc == nil {
		return nil, nil
	}
	key := res.GVK().String() + "/" + subresource
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.managers[key]; ok {
		return m, nil
	}
	m, err := managedfields.NewDefaultFieldManager(tc, f.convert, defaulter(res.Default), f.scheme,
		res.GVK(), res.GVK().GroupVersion(), subresource, resetFields(res, subresource))
	if err != nil {
		return nil, fmt.Errorf("field manager for %s: %w", res.GVK(), err)
	}
	f.managers[key] = m
	return m, nil
}

// typeConverter is the schema res's objects merge by (server-side apply,
// MutatingAdmissionPolicy's apply configurations): a custom resource's
// own, the scheme's for built-ins, nil for what has none.
func (f *fieldManagers) typeConverter(res *registry.Resource) managedfields.TypeConverter {
	switch {
	case res.ApplyTypes != nil:
		return res.ApplyTypes
	case !f.scheme.Recognizes(res.GVK()):
		return nil
	case deducedGroups[res.Group]:
		return deducedTypes
	}
	f.once.Do(func() { f.tc = applyconfigurations.NewTypeConverter(f.scheme) })
	return f.tc
}

var deducedTypes = managedfields.NewDeducedTypeConverter()

// deducedGroups are the groups in the scheme whose schemas client-go's
// apply configurations do not carry: their fields are deduced from the
// objects (maps merge key by key, lists are atomic).
var deducedGroups = map[string]bool{"apiextensions.k8s.io": true, "apiregistration.k8s.io": true}

// resetFields are the fields a write through this endpoint cannot set: the
// main resource does not own status, the status subresource owns only it.
func resetFields(res *registry.Resource, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !res.Status {
		return nil
	}
	path := "status"
	if subresource == "status" {
		path = "spec"
	}
	set := fieldpath.NewSet(fieldpath.MakePathOrDie(path))
	return fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(res.GVK().GroupVersion().String()): set,
	})
}

// managerName is who a write is recorded for: the fieldManager parameter,
// or the client program's name from its User-Agent, as upstream does.
func managerName(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua := r.Header.Get("User-Agent")
	if i := strings.Index(ua, "/"); i > 0 {
		ua = ua[:i]
	}
	if ua == "" {
		return "unknown"
	}
	return ua
}

// trackUpdate records a non-apply write of obj (over live, which is an
// empty object on create) in obj's managedFields. A failure keeps the
// write going with live's managedFields, as upstream's UpdateNoErrors does.
func (s *Server) trackUpdate(q *request, live, obj runtime.Object) runtime.Object {
	if q.applied {
		return obj // server-side apply recorded it already
	}
	fm, err := s.fields.For(q.res, q.info.Subresource)
	if err != nil || fm == nil {
		return obj
	}
	obj.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	live.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	return fm.UpdateNoErrors(live, obj, managerName(q.r))
}

// applyObject merges an applied configuration into live (an empty object
// when creating) for manager.
func (s *Server) applyObject(q *request, live, applied runtime.Object) (runtime.Object, error) {
	manager := q.r.URL.Query().Get("fieldManager")
	if manager == "" {
		return nil, apierrors.NewBadRequest("fieldManager is required for apply requests")
	}
	fm, err := s.fields.For(q.res, q.info.Subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if fm == nil {
		return nil, unsupportedMediaType("application/apply-patch+yaml (server-side apply is not available for " + q.res.Name + ")")
	}
	force := q.r.URL.Query().Get("force") == "true"
	live.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	applied.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	out, err := fm.Apply(live, applied, manager, force)
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, err // a conflict: 409 naming the fields and their managers
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, nil
}

// custom is the field manager of a custom resource, over the type
// converter its row carries (built from its CRD's schema). A row replaced
// because its CRD changed gets a new manager.
func (f *fieldManagers) custom(res *registry.Resource, subresource string) (*managedfields.FieldManager, error) {
	key := res.GVK().String() + "/" + subresource
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.customs[key]; ok && m.res == res {
		return m.fm, nil
	}
	fm, err := managedfields.NewDefaultCRDFieldManager(res.ApplyTypes, customConvertor{f.convert}, defaulter(res.Default),
		unstructuredCreater{}, res.GVK(), res.GVK().GroupVersion(), subresource, resetFields(res, subresource))
	if err != nil {
		return nil, fmt.Errorf("field manager for %s: %w", res.GVK(), err)
	}
	if f.customs == nil {
		f.customs = map[string]customManager{}
	}
	f.customs[key] = customManager{res: res, fm: fm}
	return fm, nil
}

type customManager struct {
	res *registry.Resource
	fm  *managedfields.FieldManager
}

// unstructuredCreater makes the empty objects the field manager asks for:
// custom objects are unstructured.
type unstructuredCreater struct{}

func (unstructuredCreater) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// customConvertor converts custom objects between their versions through
// the registry's conversions; a custom object asked for in its own version
// is returned as is (the scheme does not know its kind).
type customConvertor struct {
	runtime.ObjectConvertor
}

func (c customConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	from := in.GetObjectKind().GroupVersionKind()
	if to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from}); ok && to == from {
		return in, nil
	}
	return c.ObjectConvertor.ConvertToVersion(in, target)
}
