package crd

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/registry"
)

// scaleHooks read and write replicas at the paths a CRD's scale
// subresource names (.spec.replicas, .status.replicas, .status.selector).
func scaleHooks(s *apiextensionsv1.CustomResourceSubresourceScale) *registry.ScaleHooks {
	specPath := splitPath(s.SpecReplicasPath)
	statusPath := splitPath(s.StatusReplicasPath)
	var selPath []string
	if s.LabelSelectorPath != nil {
		selPath = splitPath(*s.LabelSelectorPath)
	}
	return &registry.ScaleHooks{
		Get: func(obj runtime.Object) (spec, status int32, sel string, err error) {
			m := content(obj)
			if m == nil {
				return 0, 0, "", fmt.Errorf("custom object is %T", obj)
			}
			if spec, err = replicasAt(m, specPath, s.SpecReplicasPath); err != nil {
				return 0, 0, "", err
			}
			if status, err = replicasAt(m, statusPath, s.StatusReplicasPath); err != nil {
				return 0, 0, "", err
			}
			if selPath != nil {
				sel, _, _ = unstructured.NestedString(m, selPath...)
			}
			return spec, status, sel, nil
		},
		Set: func(obj runtime.Object, replicas int32) error {
			m := content(obj)
			if m == nil {
				return fmt.Errorf("custom object is %T", obj)
			}
			return unstructured.SetNestedField(m, int64(replicas), specPath...)
		},
	}
}

// splitPath turns ".spec.replicas" into [spec replicas].
func splitPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

// replicasAt reads a replica count; absent is 0, as upstream.
func replicasAt(m map[string]any, path []string, name string) (int32, error) {
	v, found, err := unstructured.NestedFieldNoCopy(m, path...)
	if err != nil || !found || v == nil {
		return 0, nil
	}
	switch n := v.(type) {
	case int64:
		return int32(n), nil
	case float64:
		return int32(n), nil
	}
	return 0, fmt.Errorf("%s is %T, not an integer", name, v)
}

// selectableFields reads a version's selectableFields for field selectors.
func selectableFields(fields []apiextensionsv1.SelectableField) func(obj runtime.Object) map[string]string {
	type sf struct {
		name string
		path []string
	}
	var list []sf
	for _, f := range fields {
		list = append(list, sf{name: strings.TrimPrefix(f.JSONPath, "."), path: splitPath(f.JSONPath)})
	}
	return func(obj runtime.Object) map[string]string {
		m := content(obj)
		out := make(map[string]string, len(list))
		for _, f := range list {
			v, found, _ := unstructured.NestedFieldNoCopy(m, f.path...)
			if !found || v == nil {
				out[f.name] = ""
				continue
			}
			out[f.name] = fmt.Sprint(v)
		}
		return out
	}
}
