package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"skiff/server/admission/webhook/matchcond"
	"skiff/server/apiserver"
	"skiff/server/webhook"
)

const (
	reviewV1      = "admission.k8s.io/v1"
	reviewV1beta1 = "admission.k8s.io/v1beta1"
)

// review is an AdmissionReview of either version: v1beta1's request and
// response have the same fields as v1's.
type review struct {
	metav1.TypeMeta `json:",inline"`
	Request         *admissionv1.AdmissionRequest  `json:"request,omitempty"`
	Response        *admissionv1.AdmissionResponse `json:"response,omitempty"`
}

// reviewVersion is the first version the webhook accepts that the server
// speaks, as upstream.
func reviewVersion(h *hook) (string, error) {
	for _, v := range h.versions {
		switch v {
		case "v1":
			return reviewV1, nil
		case "v1beta1":
			return reviewV1beta1, nil
		}
	}
	return "", errors.New("webhook does not accept known AdmissionReview versions (v1, v1beta1)")
}

// objectMap is obj as unstructured content with its apiVersion and kind
// (typed objects from the store carry neither).
func objectMap(obj runtime.Object, gvk schemaGVK) (map[string]any, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, nil
	}
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = runtime.DeepCopyJSON(u.Object)
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, err
		}
	}
	if _, ok := m["kind"]; !ok || m["kind"] == "" {
		m["apiVersion"], m["kind"] = gvk.apiVersion, gvk.kind
	}
	return m, nil
}

type schemaGVK struct{ apiVersion, kind string }

// objectGVK is the type metadata a request's object is sent with.
func (r *request) objectGVK(t target) schemaGVK {
	return schemaGVK{apiVersion: t.gvk.GroupVersion().String(), kind: t.gvk.Kind}
}

// admissionRequest builds the AdmissionRequest upstream sends.
func (r *request) admissionRequest(t target) (*admissionv1.AdmissionRequest, map[string]any, map[string]any, error) {
	obj, err := objectMap(r.obj, r.objectGVK(t))
	if err != nil {
		return nil, nil, nil, err
	}
	old, err := objectMap(r.old, r.objectGVK(t))
	if err != nil {
		return nil, nil, nil, err
	}
	dry := r.a.DryRun
	req := &admissionv1.AdmissionRequest{
		UID:                types.UID(uuid.NewUUID()),
		Kind:               metav1.GroupVersionKind(t.gvk),
		Resource:           metav1.GroupVersionResource(t.gvr),
		SubResource:        r.sub,
		RequestKind:        ptr(metav1.GroupVersionKind(r.gvk)),
		RequestResource:    ptr(metav1.GroupVersionResource(r.gvr)),
		RequestSubResource: r.sub,
		Name:               r.name,
		Namespace:          r.namespace,
		Operation:          admissionv1.Operation(r.op),
		DryRun:             &dry,
	}
	if u := r.a.User; u != nil {
		req.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			req.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
			for k, v := range u.Extra {
				req.UserInfo.Extra[k] = v
			}
		}
	}
	for _, x := range []struct {
		m   map[string]any
		raw *runtime.RawExtension
	}{{obj, &req.Object}, {old, &req.OldObject}, {options(r.op, dry), &req.Options}} {
		if x.m == nil {
			continue
		}
		b, err := json.Marshal(x.m)
		if err != nil {
			return nil, nil, nil, err
		}
		x.raw.Raw = b
	}
	return req, obj, old, nil
}

// options are the operation's options as upstream sends them.
func options(op apiserver.Operation, dry bool) map[string]any {
	kind := map[apiserver.Operation]string{apiserver.OpCreate: "CreateOptions", apiserver.OpUpdate: "UpdateOptions", apiserver.OpDelete: "DeleteOptions"}[op]
	if kind == "" {
		return nil
	}
	m := map[string]any{"kind": kind, "apiVersion": "meta.k8s.io/v1"}
	if dry {
		m["dryRun"] = []any{metav1.DryRunAll}
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func conditionVars(r *request, t target) (matchcond.Vars, error) {
	req, obj, old, err := r.admissionRequest(t)
	if err != nil {
		return matchcond.Vars{}, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return matchcond.Vars{}, err
	}
	var rm map[string]any
	if err := json.Unmarshal(b, &rm); err != nil {
		return matchcond.Vars{}, err
	}
	// The objects themselves keep their integers.
	rm["object"], rm["oldObject"] = obj, old
	return matchcond.Vars{Object: obj, OldObject: old, Request: rm}, nil
}

// call sends the review and checks the answer as upstream's
// VerifyAdmissionResponse. Errors are *callError, or a refusal for a
// dry-run the webhook cannot take.
func (d *dispatcher) call(ctx context.Context, h *hook, r *request, t target) (*admissionv1.AdmissionResponse, error) {
	if r.a.DryRun {
		if h.sideEffects == nil {
			return nil, &callError{name: h.name, reason: errors.New("Webhook SideEffects is nil")}
		}
		if s := *h.sideEffects; s != admissionregistrationv1.SideEffectClassNone && s != admissionregistrationv1.SideEffectClassNoneOnDryRun {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.name))
		}
	}
	version, err := reviewVersion(h)
	if err != nil {
		return nil, &callError{name: h.name, reason: fmt.Errorf("could not create admission objects: %w", err)}
	}
	req, _, _, err := r.admissionRequest(t)
	if err != nil {
		return nil, &callError{name: h.name, reason: fmt.Errorf("could not create admission objects: %w", err)}
	}
	in := review{TypeMeta: metav1.TypeMeta{APIVersion: version, Kind: "AdmissionReview"}, Request: req}
	var out review
	if err := d.cfg.Client.Do(ctx, webhook.FromAdmission(h.clientConfig), h.timeout, &in, &out); err != nil {
		return nil, &callError{name: h.name, reason: fmt.Errorf("failed to call webhook: %w", err)}
	}
	resp, err := verify(h, version, req.UID, &out)
	if err != nil {
		return nil, &callError{name: h.name, reason: fmt.Errorf("received invalid webhook response: %w", err)}
	}
	auditResponse(ctx, h, resp) // audit.go
	if w := apiserver.WarnerFrom(ctx); w != nil {
		for _, msg := range resp.Warnings {
			w.AddWarning(msg)
		}
	}
	if !resp.Allowed {
		return nil, denied(h.name, resp.Result)
	}
	return resp, nil
}

func verify(h *hook, version string, uid types.UID, out *review) (*admissionv1.AdmissionResponse, error) {
	resp := out.Response
	if resp == nil {
		return nil, errors.New("webhook response was absent")
	}
	if version == reviewV1beta1 {
		// v1beta1 answers were never checked for uid, kind or patch type.
		if !h.mutating {
			resp.Patch, resp.PatchType = nil, nil
		} else if len(resp.Patch) > 0 {
			resp.PatchType = ptr(admissionv1.PatchTypeJSONPatch)
		}
		return resp, nil
	}
	if resp.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, resp.UID)
	}
	if out.APIVersion != reviewV1 || out.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s", out.GroupVersionKind().String())
	}
	switch {
	case h.mutating && len(resp.Patch) > 0 && resp.PatchType == nil:
		return nil, errors.New("webhook returned response.patch but not response.patchType")
	case h.mutating && len(resp.Patch) == 0 && resp.PatchType != nil:
		return nil, errors.New("webhook returned response.patchType but not response.patch")
	case h.mutating && resp.PatchType != nil && *resp.PatchType == "":
		return nil, fmt.Errorf("webhook returned invalid response.patchType of %q", *resp.PatchType)
	case !h.mutating && len(resp.Patch) > 0:
		return nil, errors.New("validating webhook may not return response.patch")
	case !h.mutating && resp.PatchType != nil:
		return nil, errors.New("validating webhook may not return response.patchType")
	}
	return resp, nil
}

// denied is upstream's ToStatusErr: the webhook's Status, at least a 400
// and a Failure, its message prefixed with who denied the request.
func denied(name string, result *metav1.Status) error {
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	by := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = by + ": " + st.Message
	case st.Reason != "":
		st.Message = by + ": " + string(st.Reason)
	default:
		st.Message = by + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

func (d *dispatcher) callValidating(ctx context.Context, h *hook, r *request, t target) error {
	_, err := d.call(ctx, h, r, t)
	return err
}

// callMutating calls h and applies its patch to the request's object in
// place, then re-defaults it as upstream does after a mutation. It
// reports whether the object changed.
func (d *dispatcher) callMutating(ctx context.Context, h *hook, r *request, t target, site mutationSite) (changed bool, err error) {
	defer func() { site.mutated(ctx, h, changed) }() // audit.go
	resp, err := d.call(ctx, h, r, t)
	if err != nil || len(resp.Patch) == 0 {
		return false, err
	}
	if *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		return false, &callError{name: h.name, reason: fmt.Errorf("unsupported patch type %q", *resp.PatchType)}
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		return false, &callError{name: h.name, reason: fmt.Errorf("received undecodable patch in webhook response: %w", err)}
	}
	if len(patch) == 0 {
		return false, nil
	}
	obj := r.a.Object
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", h.name))
	}
	m, err := objectMap(obj, r.objectGVK(t))
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	js, err := json.Marshal(m)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	patched, err := patch.Apply(js)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q returned a patch that cannot be applied: %w", h.name, err))
	}
	before := obj.DeepCopyObject()
	if err := replace(obj, patched); err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q returned a patch that cannot be applied: %w", h.name, err))
	}
	site.patched(ctx, h, patch) // audit.go
	if res := r.a.Resource; res != nil && r.sub == "" {
		// A custom resource's schema prunes what a webhook added that it
		// does not declare, as upstream's storage does.
		if res.Prune != nil {
			res.Prune(obj)
		}
		if res.Default != nil {
			res.Default(obj)
		}
	}
	return !equality.Semantic.DeepEqual(before, obj), nil
}

// replace decodes data into obj in place, so the server's pipeline goes on
// with the patched object; a typed object keeps its type metadata as the
// server had it.
func replace(obj runtime.Object, data []byte) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fresh := &unstructured.Unstructured{}
		if err := fresh.UnmarshalJSON(data); err != nil {
			return err
		}
		u.Object = fresh.Object
		return nil
	}
	v := reflect.ValueOf(obj).Elem()
	fresh := reflect.New(v.Type())
	if err := json.Unmarshal(data, fresh.Interface()); err != nil {
		return err
	}
	tm := obj.GetObjectKind().GroupVersionKind()
	v.Set(fresh.Elem())
	obj.GetObjectKind().SetGroupVersionKind(tm)
	return nil
}
