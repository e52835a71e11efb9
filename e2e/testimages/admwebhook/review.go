package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/e2e/testimages/reviewhttp"
)

// What /mutate adds to the object: a label, and an annotation that echoes
// the request's dryRun, so that a test reads in the object itself whether
// the webhook saw a dry run.
const (
	MutatedLabel     = "admwebhook.skiff.test/mutated"
	DryRunAnnotation = "admwebhook.skiff.test/dry-run"
)

// answer decides one request; serve fills in the response's uid.
type answer func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Handler is the webhook's HTTP surface: one path per answer, and health.
func Handler(hangFor time.Duration, logger *log.Logger) http.Handler {
	mux := http.NewServeMux()
	for path, a := range map[string]answer{
		"/allow":  allow,
		"/deny":   deny,
		"/mutate": mutate,
		"/warn":   warn,
		"/hang":   hang(hangFor),
	} {
		mux.Handle(path, serve(a, logger))
	}
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	return mux
}

// describe names a request as the answers' messages and the log show it:
// operation, resource (and subresource), name and dryRun.
func describe(req *admissionv1.AdmissionRequest) string {
	res := req.Resource.Resource
	if req.SubResource != "" {
		res += "/" + req.SubResource
	}
	return fmt.Sprintf("%s %s %q dryRun=%t", req.Operation, res, req.Name, dryRun(req))
}

func dryRun(req *admissionv1.AdmissionRequest) bool { return req.DryRun != nil && *req.DryRun }

// allow admits the request as it is.
func allow(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// deny refuses every request with a 403 Status saying what it refused.
func deny(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: "admwebhook refuses " + describe(req),
	}}
}

// warn admits the request with a warning saying what it saw.
func warn(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"admwebhook saw " + describe(req)}}
}

// hang holds the request for d, or until the caller gives up, then admits
// it: a webhook slower than its timeout.
func hang(d time.Duration) answer {
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return allow(ctx, req)
	}
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// mutate admits the request with a JSON Patch adding MutatedLabel and
// DryRunAnnotation. A request without an object (DELETE) is admitted
// unchanged.
func mutate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if len(req.Object.Raw) == 0 {
		return allow(ctx, req)
	}
	var obj struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusBadRequest, Message: "admwebhook: decode object: " + err.Error(),
		}}
	}
	patch, err := json.Marshal([]patchOp{
		addOp("/metadata/labels", obj.Metadata.Labels, MutatedLabel, "true"),
		addOp("/metadata/annotations", obj.Metadata.Annotations, DryRunAnnotation, strconv.FormatBool(dryRun(req))),
	})
	if err != nil {
		panic(err) // strings and maps of strings always marshal
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// addOp adds key=value to the map at path. A JSON Patch add cannot make
// a missing parent, so an object without the map gets it whole.
func addOp(path string, m map[string]string, key, value string) patchOp {
	if m == nil {
		return patchOp{Op: "add", Path: path, Value: map[string]string{key: value}}
	}
	return patchOp{Op: "add", Path: path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key), Value: value}
}

// reviewKind is what every answer's endpoint takes and gives.
var reviewKind = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// serve is one answer's endpoint: a POSTed admission.k8s.io/v1
// AdmissionReview in, the same kind out with the request's uid.
func serve(a answer, logger *log.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in admissionv1.AdmissionReview
		if !reviewhttp.Read(w, r, reviewKind, &in) {
			return
		}
		resp := a(r.Context(), in.Request)
		resp.UID = in.Request.UID
		if logger != nil {
			logger.Printf("%s: %s: allowed=%t", r.URL.Path, describe(in.Request), resp.Allowed)
		}
		reviewhttp.Write(w, admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp})
	}
}
