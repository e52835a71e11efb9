// Package webhook calls the cluster's admission webhooks as upstream's
// MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins do: the
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations of the
// watch cache, sorted by name, each webhook matched on its rules, match
// policy, namespace and object selectors and CEL match conditions, and
// called with an AdmissionReview (v1, or v1beta1 when that is all it
// accepts). Mutating webhooks run one after another and patch the object
// (JSONPatch); IfNeeded ones run again on the admission chain's
// reinvocation pass when a later webhook or plugin changed the object
// (apiserver/reinvocation.go); validating webhooks run in parallel.
// Failures follow each webhook's failurePolicy.
package webhook

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"skiff/server/apiserver"
	"skiff/server/registry"
	"skiff/server/webhook"
)

// Caller makes one webhook call (server/webhook's Client).
type Caller interface {
	Do(ctx context.Context, cc webhook.ClientConfig, timeout time.Duration, request, response any) error
}

// Source lists the webhook configurations (the watch cache's); order does
// not matter.
type Source interface {
	MutatingWebhookConfigurations(ctx context.Context) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error)
	ValidatingWebhookConfigurations(ctx context.Context) ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error)
}

// Namespaces finds a namespace for namespaceSelector; a missing one is a
// NotFound API error, which upstream returns to the client.
type Namespaces interface {
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// Resources tells whether a group/version/resource is served, for the
// Equivalent match policy.
type Resources interface {
	Lookup(group, version, name string) (*registry.Resource, bool)
}

// Config configures both plugins.
type Config struct {
	Client     Caller
	Source     Source
	Namespaces Namespaces
	Resources  Resources
	// Authorizer answers matchConditions' `authorizer` checks; nil leaves
	// those variables unbound (conditions using them fail to evaluate).
	Authorizer Authorizer
	// Logger gets a warning for each webhook failing open; nil discards.
	Logger *slog.Logger
}

// Mutating is the MutatingAdmissionWebhook plugin.
type Mutating struct{ d *dispatcher }

// Validating is the ValidatingAdmissionWebhook plugin.
type Validating struct{ d *dispatcher }

// NewMutating makes the mutating plugin.
func NewMutating(cfg Config) *Mutating { return &Mutating{d: newDispatcher(cfg)} }

// NewValidating makes the validating plugin.
func NewValidating(cfg Config) *Validating { return &Validating{d: newDispatcher(cfg)} }

// Admit implements apiserver.Admitter.
func (m *Mutating) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if exempt(a) {
		return nil
	}
	hooksRun := a.Reinvocation.Hooks(m) // apiserver/reinvocation.go
	if a.Reinvocation.IsReinvoke() && !hooksRun.BeginReinvoke(a.Object) {
		return nil // no webhook to call again: nothing to match
	}
	cfgs, err := m.d.cfg.Source.MutatingWebhookConfigurations(ctx)
	if err != nil {
		return internalError(err)
	}
	sort.Slice(cfgs, func(i, j int) bool { return cfgs[i].Name < cfgs[j].Name })
	var hooks []*hook
	for _, c := range cfgs {
		for i := range c.Webhooks {
			hooks = append(hooks, fromMutating(c, i))
		}
	}
	return m.d.mutate(ctx, a, hooks, hooksRun)
}

// Reinvocable: the mutating webhooks take part in the chain's
// reinvocation pass (apiserver/reinvocation.go).
func (*Mutating) Reinvocable() {}

// Admit implements apiserver.Admitter.
func (v *Validating) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if exempt(a) {
		return nil
	}
	cfgs, err := v.d.cfg.Source.ValidatingWebhookConfigurations(ctx)
	if err != nil {
		return internalError(err)
	}
	sort.Slice(cfgs, func(i, j int) bool { return cfgs[i].Name < cfgs[j].Name })
	var hooks []*hook
	for _, c := range cfgs {
		for i := range c.Webhooks {
			hooks = append(hooks, fromValidating(c, i))
		}
	}
	return v.d.validate(ctx, a, hooks)
}

// exempt: upstream never sends the admission configuration kinds
// themselves to webhooks, so that a broken webhook cannot lock the cluster
// out of removing it, nor the virtual authentication and authorization
// reviews (ExcludeAdmissionWebhookVirtualResources, on since 1.37).
func exempt(a apiserver.AdmissionAttributes) bool {
	if a.Resource == nil {
		return true
	}
	switch a.Resource.Group {
	case admissionregistrationv1.GroupName:
		switch a.Resource.Name {
		case "mutatingwebhookconfigurations", "validatingwebhookconfigurations",
			"validatingadmissionpolicies", "validatingadmissionpolicybindings",
			"mutatingadmissionpolicies", "mutatingadmissionpolicybindings":
			return true
		}
	case "authentication.k8s.io":
		return a.Resource.Name == "selfsubjectreviews" || a.Resource.Name == "tokenreviews"
	case "authorization.k8s.io":
		return strings.HasSuffix(a.Resource.Name, "subjectaccessreviews") || a.Resource.Name == "selfsubjectrulesreviews"
	}
	return false
}

// ValidatingPhase: validating webhooks run after the object is validated.
func (*Validating) ValidatingPhase() {}
