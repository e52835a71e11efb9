package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/audit"
	"skiff/server/auth"
)

// saUserPrefix starts the user names of service accounts.
const saUserPrefix = "system:serviceaccount:"

// impersonation is one thing a request asks to act as, with the
// authorization check ("impersonate" on it) the caller must pass.
type impersonation struct {
	check auth.Attributes
	apply func(u *auth.User)
}

// impersonate serves upstream's user impersonation (Impersonate-User,
// -Group, -Uid, -Extra-* headers, what kubectl --as and client-go's
// ImpersonationConfig send): the caller must be allowed to impersonate
// each of them, and the request then runs as the impersonated user.
// Ignoring the headers would run the request with the caller's rights,
// so a check made "as" someone else would report the caller's answer.
func (s *Server) impersonate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wanted, err := impersonations(r.Header)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if len(wanted) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		caller := auth.UserFrom(r.Context())
		u := &auth.User{Extra: map[string][]string{}}
		for _, imp := range wanted {
			a := imp.check
			a.User, a.Verb, a.ResourceRequest = caller, "impersonate", true
			ok, reason, err := s.cfg.Authorizer.Authorize(r.Context(), a)
			if err != nil {
				s.log.Error("authorization failed", "path", r.URL.Path, "err", err)
			}
			if !ok {
				writeError(w, r, forbidden(a, reason))
				return
			}
			imp.apply(u)
		}
		addImplicitGroup(u)
		audit.LogImpersonatedUser(r.Context(), userInfo(u)) // reviews.go
		r = r.WithContext(auth.WithUser(r.Context(), u))
		for h := range r.Header {
			if strings.HasPrefix(h, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
				r.Header.Del(h)
			}
		}
		r.Header.Del(authenticationv1.ImpersonateUserHeader)
		r.Header.Del(authenticationv1.ImpersonateGroupHeader)
		r.Header.Del(authenticationv1.ImpersonateUIDHeader)
		next.ServeHTTP(w, r)
	})
}

// impersonations reads the impersonation headers in upstream's order:
// user, groups, extra, uid. Groups, extra or uid without a user is a bad
// request.
func impersonations(h http.Header) ([]impersonation, error) {
	var out []impersonation
	name := h.Get(authenticationv1.ImpersonateUserHeader)
	groupsGiven := len(h.Values(authenticationv1.ImpersonateGroupHeader)) > 0
	if name != "" {
		out = append(out, userImpersonation(name, groupsGiven))
	}
	for _, g := range h.Values(authenticationv1.ImpersonateGroupHeader) {
		g := g
		out = append(out, impersonation{
			check: auth.Attributes{Resource: "groups", Name: g},
			apply: func(u *auth.User) { u.Groups = append(u.Groups, g) },
		})
	}
	for header, values := range h {
		key, ok := strings.CutPrefix(header, authenticationv1.ImpersonateUserExtraHeaderPrefix)
		if !ok {
			continue
		}
		key = strings.ToLower(key)
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		for _, v := range values {
			v := v
			out = append(out, impersonation{
				check: auth.Attributes{APIGroup: "authentication.k8s.io", APIVersion: "v1", Resource: "userextras", Subresource: key, Name: v},
				apply: func(u *auth.User) { u.Extra[key] = append(u.Extra[key], v) },
			})
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		out = append(out, impersonation{
			check: auth.Attributes{APIGroup: "authentication.k8s.io", APIVersion: "v1", Resource: "uids", Name: uid},
			apply: func(u *auth.User) { u.UID = uid },
		})
	}
	if len(out) > 0 && name == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("requested %d impersonations without impersonating a user", len(out)))
	}
	return out, nil
}

// userImpersonation acts as a user; a service account is checked as the
// serviceaccounts object and, unless groups are given, gets its groups.
func userImpersonation(name string, groupsGiven bool) impersonation {
	if rest, ok := strings.CutPrefix(name, saUserPrefix); ok {
		if ns, sa, ok := strings.Cut(rest, ":"); ok && ns != "" && sa != "" && !strings.Contains(sa, ":") {
			return impersonation{
				check: auth.Attributes{APIVersion: "v1", Resource: "serviceaccounts", Namespace: ns, Name: sa},
				apply: func(u *auth.User) {
					u.Name = name
					if !groupsGiven {
						u.Groups = append(u.Groups, auth.GroupServiceAccounts, auth.GroupServiceAccounts+":"+ns)
					}
				},
			}
		}
	}
	return impersonation{
		check: auth.Attributes{APIVersion: "v1", Resource: "users", Name: name},
		apply: func(u *auth.User) { u.Name = name },
	}
}

// addImplicitGroup adds system:authenticated (system:unauthenticated for
// the anonymous user) unless the impersonated groups name one already.
func addImplicitGroup(u *auth.User) {
	want := auth.GroupAuthenticated
	if u.Name == auth.UserAnonymous {
		want = auth.GroupUnauthenticated
	}
	for _, g := range u.Groups {
		if g == auth.GroupUnauthenticated || (want == auth.GroupAuthenticated && g == auth.GroupAuthenticated) {
			return
		}
	}
	u.Groups = append(u.Groups, want)
}
