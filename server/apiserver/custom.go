package apiserver

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"skiff/server/registry"
)

// Custom resources (registry.Resource.Custom) are unstructured: they are
// decoded into maps, their schema prunes what it does not declare, and
// those pruned paths are what fieldValidation reports, as upstream's CRD
// handler does.

// decodeCustom decodes a JSON or YAML body into an unstructured object of
// res. Duplicate fields and (after pruning) unknown fields are refused,
// reported or ignored per fv.
func (s *Server) decodeCustom(w http.ResponseWriter, r *http.Request, res *registry.Resource, body []byte, fv fieldValidation) (runtime.Object, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == protobufType {
		return nil, unsupportedMediaType(mt)
	}
	data, err := toJSON(r, body)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	strictErrs, err := kjson.UnmarshalStrict(data, &m, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", res.Kind, res.Version, res.Kind, err))
	}
	if m == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the object is empty", res.Kind, res.Version, res.Kind))
	}
	var msgs []string
	for _, e := range strictErrs {
		msgs = append(msgs, e.Error())
	}
	obj := &unstructured.Unstructured{Object: m}
	if err := checkCustomMeta(res, obj); err != nil {
		return nil, err
	}
	for _, p := range pruneCustom(res, obj) {
		msgs = append(msgs, fmt.Sprintf("unknown field %q", p))
	}
	if err := reportStrict(w, fv, msgs, "strict decoding error: "); err != nil {
		return nil, err
	}
	return checkKind(res, obj)
}

// checkCustomMeta refuses metadata that is not an object: everything else
// about it is validated with the object.
func checkCustomMeta(res *registry.Resource, obj *unstructured.Unstructured) error {
	md, ok := obj.Object["metadata"]
	if !ok || md == nil {
		return nil
	}
	m, isMap := md.(map[string]any)
	if !isMap {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: metadata must be an object", res.Kind, res.Version, res.Kind))
	}
	// The accessors silently read a field of the wrong type (labels as a
	// list) as empty: decode metadata as ObjectMeta, as upstream does, so
	// such a body is a 400 instead.
	var om metav1.ObjectMeta
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &om); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: metadata: %v", res.Kind, res.Version, res.Kind, err))
	}
	return nil
}

// pruneCustom prunes obj by res's schema and returns the removed paths
// without a leading dot ("spec.foo").
func pruneCustom(res *registry.Resource, obj runtime.Object) []string {
	if res.Prune == nil {
		return nil
	}
	paths := res.Prune(obj)
	for i, p := range paths {
		paths[i] = strings.TrimPrefix(p, ".")
	}
	return paths
}

// reportStrict refuses (Strict) or warns about (Warn) what a decode found.
func reportStrict(w http.ResponseWriter, fv fieldValidation, msgs []string, prefix string) error {
	if len(msgs) == 0 {
		return nil
	}
	switch fv {
	case validationStrict:
		return apierrors.NewBadRequest(prefix + strings.Join(msgs, ", "))
	case validationWarn:
		for _, m := range msgs {
			addWarning(w, m)
		}
	}
	return nil
}

// decodeCustomApply decodes a server-side apply body for a custom
// resource: duplicate YAML keys are refused under Strict, and fields the
// schema does not declare are pruned from the configuration, refused
// (Strict) or reported (Warn) as upstream's ".path: field not declared in
// schema".
func (s *Server) decodeCustomApply(w http.ResponseWriter, res *registry.Resource, body []byte, fv fieldValidation) (*unstructured.Unstructured, error) {
	toJSON := yaml.YAMLToJSON
	if fv == validationStrict {
		toJSON = yaml.YAMLToJSONStrict
	}
	data, err := toJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	var m map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &m); err != nil || m == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding apply configuration: %v", err))
	}
	obj := &unstructured.Unstructured{Object: m}
	if err := checkCustomMeta(res, obj); err != nil {
		return nil, err
	}
	var msgs []string
	for _, p := range pruneCustom(res, obj) {
		msgs = append(msgs, fmt.Sprintf(".%s: field not declared in schema", p))
	}
	if err := reportStrict(w, fv, msgs, "failed to create typed patch object: "); err != nil {
		return nil, err
	}
	if _, err := checkKind(res, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// customStatus reads an unstructured object's status.
func customStatus(obj runtime.Object) (*unstructured.Unstructured, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// setCustomStatus sets dst's status to src's (absent stays absent).
func setCustomStatus(dst, src *unstructured.Unstructured) {
	if st, ok := src.Object["status"]; ok {
		dst.Object["status"] = runtime.DeepCopyJSONValue(st)
		return
	}
	delete(dst.Object, "status")
}

// customScale reads the scale of an object through its row's hooks.
func customScale(res *registry.Resource, obj runtime.Object) (spec, status int32, sel string, err error) {
	if res.ScaleHooks == nil || res.ScaleHooks.Get == nil {
		return 0, 0, "", fmt.Errorf("%s has no scale subresource", res.Kind)
	}
	return res.ScaleHooks.Get(obj)
}
