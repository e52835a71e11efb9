package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/audit"
	"skiff/server/auth"
)

// TokenValidator checks one kind of bearer token.
type TokenValidator interface {
	// Validate returns the token's user, or an error if the token is not
	// valid for this validator.
	Validate(ctx context.Context, token string) (*auth.User, error)
}

// RequestAuthenticator authenticates with a verified client certificate
// (CN = user, O = groups) or a bearer token one of Tokens accepts.
type RequestAuthenticator struct {
	Tokens []TokenValidator
}

// Authenticate implements Authenticator.
func (a RequestAuthenticator) Authenticate(r *http.Request) (*auth.User, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		groups := append(append([]string(nil), cert.Subject.Organization...), auth.GroupAuthenticated)
		return &auth.User{Name: cert.Subject.CommonName, Groups: groups}, nil
	}
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return nil, nil
	}
	token = strings.TrimSpace(token)
	var errs []error
	for _, v := range a.Tokens {
		u, err := v.Validate(r.Context(), token)
		if err == nil {
			return u, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("bearer tokens are not accepted")
	}
	return nil, fmt.Errorf("invalid bearer token: %w", errors.Join(errs...))
}

// publicPaths may be read without credentials, as upstream's
// system:public-info-viewer role allows.
func publicPath(p string) bool {
	switch p {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		return true
	}
	for _, prefix := range []string{"/healthz/", "/livez/", "/readyz/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := auth.InProcessUserFrom(r.Context()); u != nil {
			next.ServeHTTP(w, r.WithContext(auth.WithUser(r.Context(), u)))
			return
		}
		u, err := s.cfg.Authenticator.Authenticate(r)
		if err != nil {
			s.log.Debug("authentication failed", "path", r.URL.Path, "err", err)
		}
		if u == nil {
			if err != nil || !publicPath(r.URL.Path) {
				writeError(s.auditUnauthorized(w, r), r, apierrors.NewUnauthorized("Unauthorized")) // audit.go
				return
			}
			u = &auth.User{Name: auth.UserAnonymous, Groups: []string{auth.GroupUnauthenticated}}
		}
		next.ServeHTTP(w, r.WithContext(auth.WithUser(r.Context(), u)))
	})
}

func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := parseRequest(r)
		a := attributes(auth.UserFrom(r.Context()), info)
		if a.ResourceRequest && a.Name == "" && (a.Verb == "list" || a.Verb == "watch") {
			// As upstream: a list or watch of one object by name
			// (fieldSelector=metadata.name=x) is authorized as that object,
			// so rules with resourceNames and the node authorizer apply.
			a.Name = nameFromFieldSelector(r)
		}
		ok, reason, err := s.cfg.Authorizer.Authorize(r.Context(), a)
		if err != nil {
			s.log.Error("authorization failed", "path", r.URL.Path, "err", err)
		}
		// The decision and its reason go into the audit event, as upstream.
		decision := "allow"
		if !ok {
			decision = "forbid"
		}
		audit.AddAnnotation(r.Context(), "authorization.k8s.io/decision", decision)
		audit.AddAnnotation(r.Context(), "authorization.k8s.io/reason", reason)
		if !ok {
			writeError(w, r, forbidden(a, reason))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func attributes(u *auth.User, info requestInfo) auth.Attributes {
	return auth.Attributes{
		User: u, Verb: info.Verb, ResourceRequest: info.Resource,
		APIGroup: info.Group, APIVersion: info.Version, Resource: info.Plural,
		Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name,
		Path: info.Path,
	}
}

// forbidden words a denial as kube-apiserver does, so users see the same
// message: `pods is forbidden: User "x" cannot list resource "pods" in API
// group "" in the namespace "default"`.
func forbidden(a auth.Attributes, reason string) error {
	name := ""
	if a.User != nil {
		name = a.User.Name
	}
	var msg string
	if !a.ResourceRequest {
		msg = fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	} else {
		resource := a.Resource
		if a.Subresource != "" {
			resource += "/" + a.Subresource
		}
		scope := "at the cluster scope"
		if a.Namespace != "" {
			scope = fmt.Sprintf("in the namespace %q", a.Namespace)
		}
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q %s", name, a.Verb, resource, a.APIGroup, scope)
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, errors.New(msg))
}

// nameFromFieldSelector returns x when the request's field selector is
// exactly metadata.name=x (or ==x), else "".
func nameFromFieldSelector(r *http.Request) string {
	sel := r.URL.Query().Get("fieldSelector")
	if sel == "" || strings.Contains(sel, ",") {
		return ""
	}
	for _, op := range []string{"==", "="} {
		if k, v, ok := strings.Cut(sel, op); ok {
			if strings.TrimSpace(k) == "metadata.name" && !strings.ContainsAny(v, "=!") {
				return strings.TrimSpace(v)
			}
			return ""
		}
	}
	return ""
}
