package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"skiff/server/audit"
)

// The audit annotations of webhook calls, as upstream's dispatchers write
// them; <r> is the reinvocation round (0 or 1), <i> the webhook's index.
const (
	mutationPrefix             = "mutation.webhook.admission.k8s.io/"               // round_<r>_index_<i>: whether it mutated
	patchPrefix                = "patch.webhook.admission.k8s.io/"                  // round_<r>_index_<i>: the patch (level Request)
	mutationFailedOpenPrefix   = "failed-open." + mutationPrefix                    // round_<r>_index_<i>: the webhook's name
	validatingFailedOpenPrefix = "failed-open.validating.webhook.admission.k8s.io/" // round_0_index_<i>
)

// auditResponse publishes a webhook's response.auditAnnotations as
// "<webhook name>/<key>"; keys that do not make a qualified name are
// dropped, as upstream's admission attributes refuse them.
func auditResponse(ctx context.Context, h *hook, resp *admissionv1.AdmissionResponse) {
	for k, v := range resp.AuditAnnotations {
		key := h.name + "/" + k
		if len(validation.IsQualifiedName(key)) > 0 {
			continue
		}
		audit.AddAnnotation(ctx, key, v)
	}
}

// mutationSite is one call of a mutating webhook.
type mutationSite struct{ round, index int }

func (s mutationSite) key(prefix string) string {
	return fmt.Sprintf("%sround_%d_index_%d", prefix, s.round, s.index)
}

// configuration is the name of the hook's configuration (its key is
// "<configuration>/<index>").
func configuration(h *hook) string {
	if i := strings.LastIndex(h.key, "/"); i >= 0 {
		return h.key[:i]
	}
	return h.key
}

// mutated records whether the call changed the object.
func (s mutationSite) mutated(ctx context.Context, h *hook, changed bool) {
	v, err := json.Marshal(struct {
		Configuration string `json:"configuration"`
		Webhook       string `json:"webhook"`
		Mutated       bool   `json:"mutated"`
	}{configuration(h), h.name, changed})
	if err == nil {
		audit.AddAnnotation(ctx, s.key(mutationPrefix), string(v))
	}
}

// patched records the patch applied: request content, so only from
// level Request up.
func (s mutationSite) patched(ctx context.Context, h *hook, patch jsonpatch.Patch) {
	v, err := json.Marshal(struct {
		Configuration string          `json:"configuration"`
		Webhook       string          `json:"webhook"`
		Patch         jsonpatch.Patch `json:"patch,omitempty"`
		PatchType     string          `json:"patchType,omitempty"`
	}{configuration(h), h.name, patch, string(admissionv1.PatchTypeJSONPatch)})
	if err == nil {
		audit.AddAnnotationWithLevel(ctx, s.key(patchPrefix), string(v), audit.LevelRequest)
	}
}

// failedOpen records a mutating webhook whose call failed and whose
// failurePolicy let the request go on.
func (s mutationSite) failedOpen(ctx context.Context, h *hook, err error) {
	if failsOpen(h, err) {
		audit.AddAnnotation(ctx, s.key(mutationFailedOpenPrefix), h.name)
	}
}

// validatingFailedOpen is failedOpen for the idx-th validating webhook
// called.
func validatingFailedOpen(ctx context.Context, h *hook, idx int, err error) {
	if failsOpen(h, err) {
		audit.AddAnnotation(ctx, fmt.Sprintf("%sround_0_index_%d", validatingFailedOpenPrefix, idx), h.name)
	}
}

func failsOpen(h *hook, err error) bool {
	var ce *callError
	return h.failurePolicy == admissionregistrationv1.Ignore && errors.As(err, &ce) && !errors.Is(err, context.Canceled)
}
