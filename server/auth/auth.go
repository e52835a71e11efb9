// Package auth holds what authentication hands to authorization: who the
// caller is, and what the request asks to do.
package auth

import "context"

// Well-known groups and users.
const (
	GroupMasters         = "system:masters"
	GroupAuthenticated   = "system:authenticated"
	GroupUnauthenticated = "system:unauthenticated"
	GroupServiceAccounts = "system:serviceaccounts"
	GroupNodes           = "system:nodes"
	UserAnonymous        = "system:anonymous"
)

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether the user belongs to group.
func (u *User) InGroup(group string) bool {
	if u == nil {
		return false
	}
	for _, g := range u.Groups {
		if g == group {
			return true
		}
	}
	return false
}

// Attributes describe one request for an authorization decision, as
// Kubernetes' authorizer attributes do.
type Attributes struct {
	User *User
	// Verb is get, list, watch, create, update, patch, delete,
	// deletecollection for resource requests; the lower-case HTTP method for
	// non-resource requests; or a special verb (impersonate, bind, escalate,
	// approve, use).
	Verb string
	// ResourceRequest is false for non-resource paths such as /healthz.
	ResourceRequest bool
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	// Path is the request path, for non-resource requests.
	Path string
}

type userKey struct{}

// WithUser returns a context carrying the authenticated user.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user in ctx, or nil.
func UserFrom(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}

type inProcessKey struct{}

// WithInProcessUser marks a request made inside the server process (by the
// control loops) as made by u. Only code in this process can set it: no
// network request carries a Go context value.
func WithInProcessUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, inProcessKey{}, u)
}

// InProcessUserFrom returns the in-process caller, or nil.
func InProcessUserFrom(ctx context.Context) *User {
	u, _ := ctx.Value(inProcessKey{}).(*User)
	return u
}
