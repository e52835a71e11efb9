package apiserver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func (s *Server) patch(q *request) {
	ctx := q.r.Context()
	mt, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
	pt := types.PatchType(mt)
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
	case types.ApplyPatchType, types.ApplyCBORPatchType:
		writeError(q.w, q.r, unsupportedMediaType(mt+" (server-side apply is not supported yet; use client-side kubectl apply)"))
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
		p, perr := jsonpatch.DecodePatch(patch)
		if perr != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", perr))
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
