// Package conversion converts custom objects between the versions of their
// CustomResourceDefinition: strategy None (only apiVersion changes) and
// Webhook (a ConversionReview v1 sent through package webhook).
package conversion

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/webhook"
)

// Converter converts custom objects of one CRD to another of its versions.
// Inputs are never modified; outputs share nothing with them. Errors are
// Kubernetes API errors a handler can return as they are.
type Converter interface {
	// Convert returns obj at apiVersion ("group/version").
	Convert(ctx context.Context, obj *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error)
	// ConvertList returns objs at apiVersion, in their order, in one
	// webhook call at most (objects already there are not sent).
	ConvertList(ctx context.Context, objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error)
}

// New makes the Converter of crd's conversion strategy; c calls its
// webhook and may be nil for strategy None.
func New(crd *apiextensionsv1.CustomResourceDefinition, c *webhook.Client) (Converter, error) {
	versions := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		versions[schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String()] = true
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy == "" || conv.Strategy == apiextensionsv1.NoneConverter {
		return &nopConverter{versions: versions}, nil
	}
	if conv.Strategy != apiextensionsv1.WebhookConverter {
		return nil, fmt.Errorf("unknown conversion strategy %q for CRD %s", conv.Strategy, crd.Name)
	}
	if conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return nil, fmt.Errorf("CRD %s has conversion strategy Webhook without a webhook clientConfig", crd.Name)
	}
	if c == nil {
		return nil, fmt.Errorf("CRD %s needs a webhook client for conversion", crd.Name)
	}
	review, err := reviewVersion(conv.Webhook.ConversionReviewVersions)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	return &webhookConverter{
		versions: versions,
		client:   c,
		cc:       webhook.FromConversion(conv.Webhook.ClientConfig),
		review:   review,
		timeout:  DefaultTimeout,
	}, nil
}

// checkVersions refuses conversions to or from a version the CRD does not
// have, as upstream's crConverter does.
func checkVersions(versions map[string]bool, objs []*unstructured.Unstructured, apiVersion string) error {
	if !versions[apiVersion] {
		return internalError(fmt.Errorf("request to convert CR to an invalid group/version: %s", apiVersion))
	}
	for i, o := range objs {
		if o == nil {
			return internalError(fmt.Errorf("request to convert CR list failed, list index %d is nil", i))
		}
		if !versions[o.GetAPIVersion()] {
			return internalError(fmt.Errorf("request to convert CR from an invalid group/version: %s", o.GetAPIVersion()))
		}
	}
	return nil
}

// nopConverter is strategy None: the versions share one schema, and only
// apiVersion changes.
type nopConverter struct {
	versions map[string]bool
}

func (n *nopConverter) Convert(ctx context.Context, obj *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error) {
	out, err := n.ConvertList(ctx, []*unstructured.Unstructured{obj}, apiVersion)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func (n *nopConverter) ConvertList(ctx context.Context, objs []*unstructured.Unstructured, apiVersion string) ([]*unstructured.Unstructured, error) {
	if err := checkVersions(n.versions, objs, apiVersion); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = withAPIVersion(o, apiVersion)
	}
	return out, nil
}

func withAPIVersion(o *unstructured.Unstructured, apiVersion string) *unstructured.Unstructured {
	c := o.DeepCopy()
	c.SetAPIVersion(apiVersion)
	return c
}

// conversionError is upstream's 500 for a failed conversion that also
// unwraps to its cause, so a caller can tell (errors.Is) a webhook that
// timed out from one that answered nonsense.
type conversionError struct {
	*apierrors.StatusError
	cause error
}

func (e *conversionError) Unwrap() []error { return []error{e.StatusError, e.cause} }

func internalError(err error) error {
	return &conversionError{StatusError: apierrors.NewInternalError(err), cause: err}
}
