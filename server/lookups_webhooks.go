package server

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// webhookLookups answers the admission webhook plugins
// (server/admission/webhook) from the watch cache: a configuration
// written a moment ago is used as soon as the cache has it.
type webhookLookups struct{ *objectLookups }

// MutatingWebhookConfigurations implements webhook.Source.
func (l webhookLookups) MutatingWebhookConfigurations(ctx context.Context) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return list[admissionregistrationv1.MutatingWebhookConfiguration](l.objectLookups, admissionregistrationv1.GroupName, "mutatingwebhookconfigurations", "")
}

// ValidatingWebhookConfigurations implements webhook.Source.
func (l webhookLookups) ValidatingWebhookConfigurations(ctx context.Context) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return list[admissionregistrationv1.ValidatingWebhookConfiguration](l.objectLookups, admissionregistrationv1.GroupName, "validatingwebhookconfigurations", "")
}

// Namespace implements webhook.Namespaces: objectLookups.Namespace
// (lookups_admission.go), with a missing namespace a NotFound error, which
// upstream's namespaceSelector returns to the client.
func (l webhookLookups) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := l.objectLookups.Namespace(ctx, name)
	if err == nil && ns == nil {
		err = apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	return ns, err
}
