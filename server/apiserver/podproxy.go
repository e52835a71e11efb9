package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/auth"
)

// DefaultKubeletPort is the agents' streaming port when a Node reports none.
const DefaultKubeletPort = 10250

// KubeletClientConfig says how the API server reaches the agents'
// streaming servers (the kubelet API on port 10250).
type KubeletClientConfig struct {
	// RootCAs verifies the agents' serving certificates (the cluster CA).
	RootCAs *x509.CertPool
	// ClientCertificate returns the certificate the API server presents to
	// the agents; it is asked at every handshake, so renewals take effect.
	ClientCertificate func() (*tls.Certificate, error)
	// DefaultPort is used for Nodes that report no kubelet port (10250).
	DefaultPort int32
	// DialTimeout bounds connecting to an agent (default 10 s).
	DialTimeout time.Duration
	// DialContext, if set, replaces the network dial.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// KubeletProxy forwards pods/log, pods/exec, pods/attach and
// pods/portforward to the agent running the pod. Upgrades (SPDY and
// WebSocket) pass through untouched: the agents speak every protocol
// kubectl does.
type KubeletProxy struct {
	cfg       KubeletClientConfig
	transport *http.Transport
	// backends reaches pods, Service endpoints and other node ports for
	// the proxy subresources (proxy_resource.go): like upstream's proxy
	// transport it does not verify their certificates, which no cluster
	// CA vouches for.
	backends *http.Transport
}

// NewKubeletProxy builds the proxy.
func NewKubeletProxy(cfg KubeletClientConfig) (*KubeletProxy, error) {
	if cfg.RootCAs == nil || cfg.ClientCertificate == nil {
		return nil, errors.New("apiserver: kubelet proxy needs RootCAs and ClientCertificate")
	}
	if cfg.DefaultPort == 0 {
		cfg.DefaultPort = DefaultKubeletPort
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	t := &http.Transport{
		DialContext: dial,
		TLSClientConfig: &tls.Config{
			RootCAs:    cfg.RootCAs,
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"}, // upgrades need HTTP/1.1
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return cfg.ClientCertificate()
			},
		},
		TLSHandshakeTimeout: cfg.DialTimeout,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	b := &http.Transport{
		DialContext: dial,
		// #nosec G402 -- pods serve self-signed certificates; upstream's
		// proxy transport skips verification too.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		TLSHandshakeTimeout: cfg.DialTimeout,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	return &KubeletProxy{cfg: cfg, transport: t, backends: b}, nil
}

// proxiedPodSubresources are served by the agent running the pod.
var proxiedPodSubresources = map[string]bool{"log": true, "exec": true, "attach": true, "portforward": true}

// proxyToKubelet serves pods/log, exec, attach and portforward: checks the
// request as upstream does, finds the pod's node and forwards it there.
func (s *Server) proxyToKubelet(q *request) {
	ctx := q.r.Context()
	kp := s.cfg.Kubelet
	if kp == nil {
		writeError(q.w, q.r, apierrors.NewServiceUnavailable("streaming to nodes is not configured on this server"))
		return
	}
	if !s.authorizeUpgradeCreate(q) {
		return
	}
	path, query, err := kubeletQuery(q.info.Subresource, q.r.URL.Query(), q.info.Name)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	if err := s.admitConnect(ctx, q); err != nil { // connect.go
		writeError(q.w, q.r, err)
		return
	}
	e, err := s.st.Get(ctx, q.res, q.info.Namespace, q.info.Name)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	pod := e.Obj.(*corev1.Pod)
	target := url.URL{Scheme: "https", RawQuery: query.Encode()}
	if q.info.Subresource == "portforward" {
		target.Path = "/portForward/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name)
	} else {
		c, err := podContainer(pod, q.r.URL.Query().Get("container"))
		if err != nil {
			writeError(q.w, q.r, err)
			return
		}
		target.Path = "/" + path + "/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name) + "/" + url.PathEscape(c)
	}
	if pod.Spec.NodeName == "" {
		writeError(q.w, q.r, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	host, err := s.kubeletHost(ctx, pod.Spec.NodeName, kp.cfg.DefaultPort)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	target.Host = host
	if q.info.Subresource == "log" && websocket.IsWebSocketUpgrade(q.r) {
		kp.logsOverWebSocket(q.w, q.r, &target, s.log) // podlog_websocket.go
		return
	}
	kp.forward(q.w, q.r, &target, s.log)
}

// authorizeUpgradeCreate also requires `create` for GET (WebSocket)
// requests to exec, attach and portforward, as kube-apiserver does since
// 1.35 (AuthorizePodWebsocketUpgradeCreatePermission): `get` on those
// subresources no longer suffices to run commands in a pod.
func (s *Server) authorizeUpgradeCreate(q *request) bool {
	if q.info.Verb != "get" || q.info.Subresource == "log" {
		return true
	}
	a := attributes(auth.UserFrom(q.r.Context()), q.info)
	a.Verb = "create"
	ok, reason, err := s.cfg.Authorizer.Authorize(q.r.Context(), a)
	if err != nil {
		s.log.Error("authorization failed", "path", q.r.URL.Path, "err", err)
	}
	if !ok {
		writeError(q.w, q.r, forbidden(a, reason))
	}
	return ok
}

// kubeletHost is host:port of the node's streaming server: its first
// InternalIP (then ExternalIP, InternalDNS, ExternalDNS, Hostname) and
// the port it reports.
func (s *Server) kubeletHost(ctx context.Context, nodeName string, defaultPort int32) (string, error) {
	nodes, ok := s.reg.Lookup("", "v1", "nodes")
	if !ok {
		return "", apierrors.NewInternalError(errors.New("nodes are not registered"))
	}
	e, err := s.st.Get(ctx, nodes, "", nodeName)
	if apierrors.IsNotFound(err) {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q of the pod is not registered", nodeName))
	}
	if err != nil {
		return "", err
	}
	node := e.Obj.(*corev1.Node)
	addr := ""
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeInternalDNS, corev1.NodeExternalDNS, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" && addr == "" {
				addr = a.Address
			}
		}
	}
	if addr == "" {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no address", nodeName))
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		port = defaultPort
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port))), nil
}

// forward reverse-proxies the request to target. Credentials the client
// sent to the API server never reach the agent.
func (kp *KubeletProxy) forward(w http.ResponseWriter, r *http.Request, target *url.URL, log *slog.Logger) {
	rp := &httputil.ReverseProxy{
		Transport:     kp.transport,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := *target
			pr.Out.URL = &u
			pr.Out.Host = u.Host
			for h := range pr.Out.Header {
				lh := strings.ToLower(h)
				if lh == "authorization" || lh == "cookie" || strings.HasPrefix(lh, "impersonate-") || strings.HasPrefix(lh, "x-remote-") {
					pr.Out.Header.Del(h)
				}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode < 300 {
				return nil
			}
			return backendError(resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				log.Debug("agent unreachable", "url", target.Redacted(), "err", err)
				err = apierrors.NewServiceUnavailable(fmt.Sprintf("error dialing backend: %v", err))
			}
			writeError(w, r, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// backendError turns an agent's error response (plain text, as the
// kubelet's) into a Status with the same code.
func backendError(resp *http.Response) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	msg := strings.TrimSpace(string(body))
	if msg == "" {
		msg = fmt.Sprintf("the node agent responded with status %d", resp.StatusCode)
	}
	reason := metav1.StatusReasonUnknown
	switch resp.StatusCode {
	case http.StatusBadRequest:
		reason = metav1.StatusReasonBadRequest
	case http.StatusNotFound:
		reason = metav1.StatusReasonNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		// The agent refused the API server itself: a server-side problem.
		return apierrors.NewInternalError(fmt.Errorf("the node agent refused the API server's credentials: %s", msg))
	case http.StatusInternalServerError:
		reason = metav1.StatusReasonInternalError
	case http.StatusServiceUnavailable:
		reason = metav1.StatusReasonServiceUnavailable
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(resp.StatusCode), Reason: reason, Message: msg}}
}
