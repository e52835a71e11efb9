package policy

import (
	"context"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/auth"
	skiffcel "skiff/server/cel"
)

// Authorizer answers the checks of the `authorizer` variable: the API
// server's authorizer, asked for the request's user.
type Authorizer interface {
	Authorize(ctx context.Context, a auth.Attributes) (allowed bool, reason string, err error)
}

// Option configures the plugin.
type Option func(*Plugin)

// WithAuthorizer binds `authorizer` and `authorizer.requestResource` to
// checks with a for the requesting user. Without it expressions using them
// still compile (as upstream, where they are always declared) but fail to
// evaluate, and the policy's failurePolicy decides.
func WithAuthorizer(a Authorizer) Option {
	return func(p *Plugin) { p.authz = a }
}

// authorizerEnvOptions declares `authorizer` and
// `authorizer.requestResource`, which upstream gives every policy
// expression except messageExpression.
func authorizerEnvOptions() []cel.EnvOption { return skiffcel.AuthorizerDeclarations() }

// addAuthorizer binds the authorizer variables into vars when the plugin
// has an authorizer. The values hold r.ctx: checks run under the request.
func (r *run) addAuthorizer(vars map[string]any) {
	if r.p.authz == nil {
		return
	}
	for k, v := range skiffcel.AuthorizerBindings(r.ctx, r.p.authz, r.a.User, r.requestResource()) {
		vars[k] = v
	}
}

// requestResource is the request's resource as upstream's attributes give
// it: the object's own name (empty for a generateName create), and a
// namespace's name as its namespace.
func (r *run) requestResource() skiffcel.RequestResource {
	a := r.attrs
	name := r.a.Name
	for _, o := range []runtime.Object{a.obj, a.old} {
		if o == nil || name != "" {
			continue
		}
		if acc, err := metaAccessor(o); err == nil {
			name = acc.GetName()
		}
	}
	ns := a.namespace
	if ns == "" && a.isNamespace() {
		ns = name
	}
	return skiffcel.RequestResource{Group: a.gvr.Group, Resource: a.gvr.Resource, Subresource: a.subresource, Namespace: ns, Name: name}
}
