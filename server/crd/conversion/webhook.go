package conversion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"

	"skiff/server/webhook"
)

// DefaultTimeout bounds a conversion webhook call: CRDs have no timeout
// field, and upstream's webhook clients default to 30 s.
const DefaultTimeout = 30 * time.Second

// reviewVersion is the ConversionReview version to send: v1 when the
// webhook accepts it, else v1beta1.
func reviewVersion(accepted []string) (string, error) {
	for _, v := range []string{"v1", "v1beta1"} {
		if slices.Contains(accepted, v) {
			return v, nil
		}
	}
	return "", errors.New("no supported conversion review versions")
}

// webhookConverter is strategy Webhook: upstream's webhookConverter.
type webhookConverter struct {
	versions map[string]bool
	client   *webhook.Client
	cc       webhook.ClientConfig
	review   string
	timeout  time.Duration
}

func (w *webhookConverter) Convert(ctx context.Context, obj *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error) {
	out, err := w.ConvertList(ctx, []*unstructured.Unstructured{obj}, apiVersion)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func (w *webhookConverter) ConvertList(ctx context.Context, objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error) {
	if err := checkVersions(w.versions, objs, apiVersion); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(objs))
	var send []int
	for i, o := range objs {
		switch {
		case o.GetAPIVersion() == apiVersion:
			out[i] = o.DeepCopy()
		case isEmpty(o):
			// An object of only apiVersion and kind converts to itself,
			// as upstream special-cases it rather than asking the webhook.
			out[i] = withAPIVersion(o, apiVersion)
		default:
			send = append(send, i)
		}
	}
	if len(send) == 0 {
		return out, nil
	}
	gvk := objs[send[0]].GroupVersionKind()
	raws := make([]runtime.RawExtension, len(send))
	for j, i := range send {
		b, err := objs[i].MarshalJSON()
		if err != nil {
			return nil, internalError(fmt.Errorf("conversion webhook for %v failed: encoding object %d: %w", gvk, i, err))
		}
		raws[j] = runtime.RawExtension{Raw: b}
	}
	converted, err := w.call(ctx, raws, apiVersion)
	if err != nil {
		return nil, internalError(fmt.Errorf("conversion webhook for %v failed: %w", gvk, err))
	}
	if len(converted) != len(send) {
		return nil, internalError(fmt.Errorf("conversion webhook for %v returned %d objects, expected %d", gvk, len(converted), len(send)))
	}
	for j, i := range send {
		c, err := checkConverted(objs[i], converted[j], apiVersion)
		if err != nil {
			return nil, internalError(fmt.Errorf("conversion webhook for %v returned invalid converted object at index %d: %w", gvk, j, err))
		}
		out[i] = c
	}
	return out, nil
}

// call sends one ConversionReview and returns the converted objects of a
// well-formed, successful answer.
func (w *webhookConverter) call(ctx context.Context, objects []runtime.RawExtension, apiVersion string) ([]runtime.RawExtension, error) {
	uid := uuid.NewUUID()
	if w.review == "v1beta1" {
		req := &apiextensionsv1beta1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1beta1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request:  &apiextensionsv1beta1.ConversionRequest{UID: uid, DesiredAPIVersion: apiVersion, Objects: objects},
		}
		var resp apiextensionsv1beta1.ConversionReview
		if err := w.client.Do(ctx, w.cc, w.timeout, req, &resp); err != nil {
			return nil, err
		}
		// Upstream never checked a v1beta1 answer's kind or uid; webhooks
		// written against it may leave them out.
		if resp.Response == nil {
			return nil, errors.New("no response provided")
		}
		if err := checkResult(resp.Response.Result); err != nil {
			return nil, err
		}
		return resp.Response.ConvertedObjects, nil
	}
	req := &apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: apiVersion, Objects: objects},
	}
	var resp apiextensionsv1.ConversionReview
	if err := w.client.Do(ctx, w.cc, w.timeout, req, &resp); err != nil {
		return nil, err
	}
	want := apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview")
	if got := resp.GroupVersionKind(); got != want {
		return nil, fmt.Errorf("expected webhook response of %v, got %v", want, got)
	}
	if resp.Response == nil {
		return nil, errors.New("no response provided")
	}
	if resp.Response.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, resp.Response.UID)
	}
	if err := checkResult(resp.Response.Result); err != nil {
		return nil, err
	}
	return resp.Response.ConvertedObjects, nil
}

func checkResult(r metav1.Status) error {
	if r.Status == metav1.StatusSuccess {
		return nil
	}
	if r.Message != "" {
		return errors.New(r.Message)
	}
	return fmt.Errorf("response.result.status was '%s', not 'Success'", r.Status)
}

// checkConverted decodes one converted object and checks it against the
// original as upstream does: the desired apiVersion, the same kind, name,
// namespace and uid; of the metadata only labels and annotations are
// taken from the webhook.
func checkConverted(original *unstructured.Unstructured, raw runtime.RawExtension, apiVersion string) (*unstructured.Unstructured, error) {
	converted := &unstructured.Unstructured{}
	if err := converted.UnmarshalJSON(raw.Raw); err != nil {
		return nil, err
	}
	if want, got := apiVersion, converted.GetAPIVersion(); !sameGroupVersion(want, got) {
		return nil, fmt.Errorf("invalid groupVersion (expected %v, received %v)", want, got)
	}
	if want, got := original.GetKind(), converted.GetKind(); want != got {
		return nil, fmt.Errorf("invalid kind (expected %v, received %v)", want, got)
	}
	if want, got := original.GetName(), converted.GetName(); want != got {
		return nil, fmt.Errorf("must have the same name: %v != %v", want, got)
	}
	if want, got := original.GetNamespace(), converted.GetNamespace(); want != got {
		return nil, fmt.Errorf("must have the same namespace: %v != %v", want, got)
	}
	if want, got := original.GetUID(), converted.GetUID(); want != got {
		return nil, fmt.Errorf("must have the same UID: %v != %v", want, got)
	}
	if err := restoreObjectMeta(original, converted); err != nil {
		return nil, fmt.Errorf("invalid metadata: %w", err)
	}
	return converted, nil
}

// sameGroupVersion compares parsed group versions, as upstream compares
// schema.GroupVersion values rather than strings.
func sameGroupVersion(a, b string) bool {
	ga, errA := schema.ParseGroupVersion(a)
	gb, errB := schema.ParseGroupVersion(b)
	return errA == nil && errB == nil && ga == gb
}

// isEmpty is an object of nothing but apiVersion and kind.
func isEmpty(u *unstructured.Unstructured) bool {
	if len(u.Object) != 2 {
		return false
	}
	_, kind := u.Object["kind"]
	_, version := u.Object["apiVersion"]
	return kind && version
}
