package apiserver

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/auth"
)

// RulesResolver lists the rules that apply to a user, for
// SelfSubjectRulesReview (`kubectl auth can-i --list`).
type RulesResolver interface {
	// RulesFor returns the user's rules in namespace (cluster-wide ones
	// included); an error means the list may be incomplete.
	RulesFor(ctx context.Context, u *auth.User, namespace string) ([]rbacv1.PolicyRule, error)
}

// review answers the create-only review resources: access reviews, rules
// reviews and token reviews are computed, never stored.
func (s *Server) review(q *request) bool {
	ctx := q.r.Context()
	obj := q.res.New()
	switch obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview, *authorizationv1.SubjectAccessReview,
		*authorizationv1.LocalSubjectAccessReview, *authorizationv1.SelfSubjectRulesReview,
		*authenticationv1.TokenReview, *authenticationv1.SelfSubjectReview:
	default:
		return false
	}
	if err := refuseTransforms(q.r); err != nil {
		writeError(q.w, q.r, err)
		return true
	}
	body, err := s.readBody(q.w, q.r)
	if err == nil {
		err = s.decodeBody(q.w, q.r, body, obj, validationIgnore)
	}
	if err == nil {
		err = s.answerReview(ctx, q, obj)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return true
	}
	obj.GetObjectKind().SetGroupVersionKind(q.res.GVK())
	writeJSON(q.w, q.r, http.StatusCreated, obj)
	return true
}

func (s *Server) answerReview(ctx context.Context, q *request, obj runtime.Object) error {
	me := auth.UserFrom(ctx)
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		o.Status = s.access(ctx, me, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
	case *authorizationv1.SubjectAccessReview:
		u := &auth.User{Name: o.Spec.User, UID: o.Spec.UID, Groups: o.Spec.Groups, Extra: extra(o.Spec.Extra)}
		o.Status = s.access(ctx, u, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
	case *authorizationv1.LocalSubjectAccessReview:
		if o.Spec.ResourceAttributes == nil || o.Spec.ResourceAttributes.Namespace != q.info.Namespace {
			return apierrors.NewBadRequest("spec.resourceAttributes.namespace must match the namespace of the request")
		}
		u := &auth.User{Name: o.Spec.User, UID: o.Spec.UID, Groups: o.Spec.Groups, Extra: extra(o.Spec.Extra)}
		o.Status = s.access(ctx, u, o.Spec.ResourceAttributes, nil)
	case *authorizationv1.SelfSubjectRulesReview:
		o.Status = s.rules(ctx, me, o.Spec.Namespace)
	case *authenticationv1.TokenReview:
		o.Status = s.tokenReview(ctx, o.Spec.Token)
	case *authenticationv1.SelfSubjectReview:
		o.Status.UserInfo = userInfo(me)
	}
	return nil
}

func extra(e map[string]authorizationv1.ExtraValue) map[string][]string {
	out := make(map[string][]string, len(e))
	for k, v := range e {
		out[k] = v
	}
	return out
}

func userInfo(u *auth.User) authenticationv1.UserInfo {
	if u == nil {
		return authenticationv1.UserInfo{}
	}
	info := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		info.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range u.Extra {
			info.Extra[k] = v
		}
	}
	return info
}

func (s *Server) access(ctx context.Context, u *auth.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	a := auth.Attributes{User: u}
	switch {
	case ra != nil:
		a.ResourceRequest = true
		a.Verb, a.APIGroup, a.APIVersion = ra.Verb, ra.Group, ra.Version
		a.Resource, a.Subresource, a.Namespace, a.Name = ra.Resource, ra.Subresource, ra.Namespace, ra.Name
	case nra != nil:
		a.Verb, a.Path = nra.Verb, nra.Path
	default:
		return authorizationv1.SubjectAccessReviewStatus{EvaluationError: "one of resourceAttributes or nonResourceAttributes is required"}
	}
	ok, reason, err := s.cfg.Authorizer.Authorize(ctx, a)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: ok, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

func (s *Server) rules(ctx context.Context, u *auth.User, namespace string) authorizationv1.SubjectRulesReviewStatus {
	if s.cfg.Rules == nil {
		return authorizationv1.SubjectRulesReviewStatus{Incomplete: true, EvaluationError: "rules are not listed by this server"}
	}
	rules, err := s.cfg.Rules.RulesFor(ctx, u, namespace)
	st := authorizationv1.SubjectRulesReviewStatus{}
	if err != nil {
		st.Incomplete, st.EvaluationError = true, err.Error()
	}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	return st
}

func (s *Server) tokenReview(ctx context.Context, token string) authenticationv1.TokenReviewStatus {
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	u, err := s.cfg.Authenticator.Authenticate(r)
	if err != nil || u == nil {
		msg := "token not recognized"
		if err != nil {
			msg = err.Error()
		}
		return authenticationv1.TokenReviewStatus{Error: msg}
	}
	return authenticationv1.TokenReviewStatus{Authenticated: true, User: userInfo(u)}
}

// refuseTransforms answers 406 when the client takes only a Table or
// partial-metadata rendering: a review is not a stored object and has no
// such rendering, which upstream refuses in content negotiation (before
// doing anything) unless Accept also lists a plain representation.
func refuseTransforms(r *http.Request) error {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return nil
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if params["as"] == "" && (mt == "application/json" || mt == "application/yaml" || mt == protobufType || mt == "application/*" || mt == "*/*") {
			return nil
		}
	}
	return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "create", schema.GroupResource{}, "",
		fmt.Sprintf("only the following media types are accepted: application/json, application/yaml (got %q)", accept), 0, false)
}
