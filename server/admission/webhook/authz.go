package webhook

import (
	"context"

	"skiff/server/admission/webhook/matchcond"
	"skiff/server/auth"
	skiffcel "skiff/server/cel"
)

// Authorizer answers the `authorizer` checks of match conditions: the API
// server's authorizer, asked for the requesting user.
type Authorizer interface {
	Authorize(ctx context.Context, a auth.Attributes) (allowed bool, reason string, err error)
}

// bindAuthorizer gives the conditions of r the authorizer variables, for
// the request's user and the resource it was made for (not the version a
// webhook's rules converted it to), as upstream's versioned attributes.
func (d *dispatcher) bindAuthorizer(v *matchcond.Vars, r *request) {
	if d.cfg.Authorizer == nil {
		return
	}
	ns := r.namespace
	if ns == "" && r.gvr.Group == "" && r.gvr.Resource == "namespaces" {
		ns = r.name // upstream's attributes name a namespace as its own
	}
	v.Authorizer, v.User = d.cfg.Authorizer, r.a.User
	v.Resource = skiffcel.RequestResource{Group: r.gvr.Group, Resource: r.gvr.Resource, Subresource: r.sub, Namespace: ns, Name: r.name}
}
