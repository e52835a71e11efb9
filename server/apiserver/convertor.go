package apiserver

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/registry"
)

// versionConvertor converts between versions of a kind that the registry
// serves over one store (registry.Conversion: autoscaling/v1 over v2), which
// the client-go scheme cannot: the field managers need it to read the
// managedFields entries a manager recorded through the other version.
// Everything else goes to the scheme.
type versionConvertor struct {
	runtime.ObjectConvertor
	reg *registry.Registry
}

func storageVersion(res *registry.Resource) string {
	if res.Convert != nil {
		return res.Convert.StorageVersion
	}
	return res.Version
}

func (c versionConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	from := in.GetObjectKind().GroupVersionKind()
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok || to == from || c.reg == nil {
		return c.ObjectConvertor.ConvertToVersion(in, target)
	}
	src, okS := c.reg.ForKind(from)
	dst, okD := c.reg.ForKind(to)
	if !okS || !okD || (src.Convert == nil && dst.Convert == nil) || storageVersion(src) != storageVersion(dst) {
		return c.ObjectConvertor.ConvertToVersion(in, target)
	}
	u, isUnstructured := in.(*unstructured.Unstructured)
	obj := in
	if isUnstructured {
		obj = src.New()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return nil, fmt.Errorf("convert %s: %w", from, err)
		}
	}
	var err error
	if src.Convert != nil {
		if obj, err = src.Convert.ToStorage(obj); err != nil {
			return nil, err
		}
	}
	if dst.Convert != nil {
		if obj, err = dst.Convert.FromStorage(obj); err != nil {
			return nil, err
		}
	}
	obj.GetObjectKind().SetGroupVersionKind(to)
	if !isUnstructured {
		return obj, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", to, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
