package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TokenIssuer signs service-account tokens (the TokenRequest API).
type TokenIssuer interface {
	// IssueToken returns a token for the service account, bound to a pod
	// when podName is set, and when it expires.
	IssueToken(req TokenRequest) (string, time.Time, error)
}

// TokenRequest is what a token is issued for.
type TokenRequest struct {
	Namespace, ServiceAccount, ServiceAccountUID string
	Audiences                                    []string
	Expiration                                   time.Duration
	PodName, PodUID                              string
	// NodeName and NodeUID are the bound pod's node, recorded in the token
	// (and so in its user's extra) as upstream does; empty when the pod is
	// not scheduled or its node is gone.
	NodeName, NodeUID string
}

// issueToken serves serviceaccounts/<name>/token.
func (s *Server) issueToken(q *request) {
	ctx := q.r.Context()
	if s.cfg.Tokens == nil {
		writeError(q.w, q.r, apierrors.NewNotFound(q.res.GVR().GroupResource(), q.info.Name))
		return
	}
	body, err := s.readBody(q.w, q.r)
	tr := &authenticationv1.TokenRequest{}
	if err == nil {
		err = s.decodeBody(q.w, q.r, body, tr, validationStrict)
	}
	var sa *corev1.ServiceAccount
	if err == nil {
		sa, err = s.serviceAccount(ctx, q)
	}
	var req TokenRequest
	if err == nil {
		req, err = s.tokenRequest(ctx, q, sa, tr)
	}
	var token string
	var expires time.Time
	if err == nil {
		token, expires, err = s.cfg.Tokens.IssueToken(req)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	tr.TypeMeta = metav1.TypeMeta{Kind: "TokenRequest", APIVersion: "authentication.k8s.io/v1"}
	tr.Name, tr.Namespace, tr.CreationTimestamp = sa.Name, sa.Namespace, metav1.Now()
	tr.Spec.Audiences = req.Audiences
	secs := int64(req.Expiration / time.Second)
	tr.Spec.ExpirationSeconds = &secs
	tr.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(expires)}
	writeJSON(q.w, q.r, http.StatusCreated, tr)
}

func (s *Server) serviceAccount(ctx context.Context, q *request) (*corev1.ServiceAccount, error) {
	e, err := s.st.Get(ctx, q.res, q.info.Namespace, q.info.Name)
	if err != nil {
		return nil, err
	}
	sa, ok := e.Obj.(*corev1.ServiceAccount)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("%T is not a ServiceAccount", e.Obj))
	}
	return sa, nil
}

func (s *Server) tokenRequest(ctx context.Context, q *request, sa *corev1.ServiceAccount, tr *authenticationv1.TokenRequest) (TokenRequest, error) {
	req := TokenRequest{Namespace: sa.Namespace, ServiceAccount: sa.Name, ServiceAccountUID: string(sa.UID),
		Audiences: tr.Spec.Audiences, Expiration: time.Hour}
	if tr.Spec.ExpirationSeconds != nil {
		req.Expiration = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
		if min := s.cfg.MinTokenExpiration; req.Expiration < min {
			return req, apierrors.NewBadRequest(fmt.Sprintf("spec.expirationSeconds: Invalid value: %d: may not specify a duration less than %v", *tr.Spec.ExpirationSeconds, min))
		}
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil {
		return req, nil
	}
	if ref.Kind != "Pod" {
		return req, apierrors.NewBadRequest(fmt.Sprintf("cannot bind a token to a %q: only Pod is supported", ref.Kind))
	}
	pods, ok := s.reg.Lookup("", "v1", "pods")
	if !ok {
		return req, apierrors.NewInternalError(fmt.Errorf("pods are not served"))
	}
	e, err := s.st.Get(ctx, pods, sa.Namespace, ref.Name)
	if err != nil {
		return req, err
	}
	pod := e.Obj.(*corev1.Pod)
	if ref.UID != "" && ref.UID != pod.UID {
		return req, apierrors.NewConflict(pods.GVR().GroupResource(), ref.Name, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record (%s)", ref.UID, pod.UID))
	}
	if pod.Spec.ServiceAccountName != sa.Name {
		return req, apierrors.NewBadRequest(fmt.Sprintf("cannot bind a token for service account %q to pod %q, which runs as %q", sa.Name, pod.Name, pod.Spec.ServiceAccountName))
	}
	req.PodName, req.PodUID = pod.Name, string(pod.UID)
	req.NodeName, req.NodeUID = s.podNode(ctx, pod)
	return req, nil
}

// podNode is the name and UID of the node a pod runs on. A node that
// cannot be read leaves the token without node claims rather than failing
// it, as upstream does.
func (s *Server) podNode(ctx context.Context, pod *corev1.Pod) (name, uid string) {
	nodes, ok := s.reg.Lookup("", "v1", "nodes")
	if !ok || pod.Spec.NodeName == "" {
		return "", ""
	}
	e := s.st.Cache().Get(nodes, "", pod.Spec.NodeName)
	if e == nil {
		var err error
		if e, err = s.st.Get(ctx, nodes, "", pod.Spec.NodeName); err != nil {
			return "", ""
		}
	}
	node, ok := e.Obj.(*corev1.Node)
	if !ok {
		return "", ""
	}
	return node.Name, string(node.UID)
}
