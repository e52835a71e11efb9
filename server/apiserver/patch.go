package apiserver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"skiff/server/storage"
)

func (s *Server) patch(q *request) {
	ctx := q.r.Context()
	mt, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
	pt := types.PatchType(mt)
	switch pt {
	case types.StrategicMergePatchType:
		if q.res.Custom { // upstream: custom resources have no patch strategies
			writeError(q.w, q.r, unsupportedMediaType(mt))
			return
		}
	case types.JSONPatchType, types.MergePatchType:
	case types.ApplyPatchType:
		s.apply(q)
		return
	default:
		writeError(q.w, q.r, unsupportedMediaType(mt))
		return
	}
	body, err := s.readBody(q.w, q.r)
	fv, ferr := parseFieldValidation(q.r)
	dry, derr := dryRun(q.r)
	if err = firstErr(err, ferr, derr); err != nil {
		writeError(q.w, q.r, err)
		return
	}
	e, err := s.updateLoop(ctx, q, 0, dry, func(cur runtime.Object) (runtime.Object, error) {
		return s.applyPatch(q, pt, body, cur, fv)
	})
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeObject(q.w, q.r, http.StatusOK, e.Obj, e.Raw)
}

// applyPatch applies one patch to the current object. A resourceVersion in
// the patch is a precondition, as upstream treats it.
func (s *Server) applyPatch(q *request, pt types.PatchType, patch []byte, cur runtime.Object, fv fieldValidation) (runtime.Object, error) {
	doc, err := json.Marshal(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var out []byte
	switch pt {
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = decodeJSONPatch(patch); err != nil {
			return nil, err
		}
		out, err = p.Apply(doc)
	case types.MergePatchType:
		out, err = jsonpatch.MergePatch(doc, patch)
	case types.StrategicMergePatchType:
		out, err = strategicpatch.StrategicMergePatch(doc, patch, q.res.New())
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the patch could not be applied: %v", err))
	}
	obj, err := s.decodeJSONObject(q.w, q.res, out, fv)
	if err != nil {
		return nil, err
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	curAcc, _ := meta.Accessor(cur)
	if rv := acc.GetResourceVersion(); rv != "" && rv != curAcc.GetResourceVersion() {
		return nil, conflict(q)
	}
	if acc.GetName() != curAcc.GetName() || acc.GetNamespace() != curAcc.GetNamespace() {
		return nil, apierrors.NewBadRequest("metadata.name and metadata.namespace cannot be changed by a patch")
	}
	return obj, nil
}

// apply serves server-side apply: the body is the manager's whole intent;
// the field manager merges it with what others own, refusing (409) to take
// fields another manager set unless force=true. A missing object is created.
func (s *Server) apply(q *request) {
	ctx := q.r.Context()
	body, err := s.readBody(q.w, q.r)
	fv, ferr := parseFieldValidation(q.r)
	dry, derr := dryRun(q.r)
	var typed runtime.Object
	// The field manager merges the configuration as sent, not its typed
	// form: decoding into a Go struct would add the zero values of fields
	// without omitempty (a StorageVersionMigration's spec.resource.group),
	// and the applier would then own and clear them. The typed decode
	// still validates the body (strict fields, name, kind).
	applied := &unstructured.Unstructured{}
	if err = firstErr(err, ferr, derr); err == nil && q.res.Custom {
		if applied, err = s.decodeCustomApply(q.w, q.res, body, fv); err == nil { // custom.go
			typed = applied.DeepCopyObject()
		}
	} else if err == nil {
		var data []byte
		if data, err = yaml.YAMLToJSON(body); err != nil {
			err = apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
		} else if typed, err = s.decodeJSONObject(q.w, q.res, data, fv); err == nil {
			if jerr := json.Unmarshal(data, &applied.Object); jerr != nil {
				err = apierrors.NewBadRequest(fmt.Sprintf("error decoding apply configuration: %v", jerr))
			}
		}
	}
	if err == nil {
		err = checkAppliedName(q, typed)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	q.applied = true
	_, getErr := s.st.Get(ctx, q.res, q.info.Namespace, q.info.Name)
	if apierrors.IsNotFound(getErr) {
		live := q.res.New()
		if acc, err := meta.Accessor(live); err == nil {
			acc.SetName(q.info.Name)
			acc.SetNamespace(q.info.Namespace)
		}
		obj, err := s.applyObject(q, live, applied)
		var e *storage.Entry
		if err == nil {
			e, err = s.createObject(ctx, q, obj, dry)
		}
		if err != nil {
			writeError(q.w, q.r, err)
			return
		}
		writeObject(q.w, q.r, http.StatusCreated, e.Obj, e.Raw)
		return
	}
	e, err := s.updateLoop(ctx, q, 0, dry, func(cur runtime.Object) (runtime.Object, error) {
		return s.applyObject(q, cur, applied.DeepCopyObject())
	})
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeObject(q.w, q.r, http.StatusOK, e.Obj, e.Raw)
}

// checkAppliedName refuses an applied configuration for another object.
func checkAppliedName(q *request, obj runtime.Object) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if acc.GetName() != "" && acc.GetName() != q.info.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", acc.GetName(), q.info.Name))
	}
	if q.res.Namespaced && acc.GetNamespace() != "" && acc.GetNamespace() != q.info.Namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// decodeJSONPatch decodes an RFC 6902 patch, refusing operations that need
// a value and have none: the json-patch library dereferences the missing
// value and panics (evanphx/json-patch#168).
func decodeJSONPatch(patch []byte) (jsonpatch.Patch, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", err))
	}
	for _, op := range p {
		switch kind := op.Kind(); kind {
		case "add", "replace", "test":
			if _, ok := op["value"]; !ok {
				return nil, apierrors.NewBadRequest("invalid JSON patch: operation " + kind + " has no value")
			}
		}
	}
	return p, nil
}
