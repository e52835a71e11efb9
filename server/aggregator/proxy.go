package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/server/auth"
	"skiff/server/serviceendpoint"
)

// errServiceUnavailable is what a client of an unavailable or unreachable
// extension API server is told (upstream's "service unavailable").
var errServiceUnavailable = errors.New("service unavailable")

// resolver finds where the Service behind an APIService is served: a
// ready endpoint of its EndpointSlices, dialled at the pod's address as
// upstream's --enable-aggregator-routing does, since the API server
// reaches pod addresses but not necessarily Service addresses.
type resolver struct {
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
}

// resolve returns the host:port to dial for port (a Service port number)
// of namespace/name.
func (r resolver) resolve(namespace, name string, port int32) (string, error) {
	svc, err := r.services.Services(namespace).Get(name)
	if err != nil {
		return "", err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil
	}
	sp, err := serviceendpoint.PortByNumber(svc, port)
	if err != nil {
		return "", err
	}
	list, err := r.slices.EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return "", err
	}
	return serviceendpoint.Random(name, list, sp.Name, serviceendpoint.PreferredAddressType(svc), nil)
}

// transports keeps one round tripper per APIService, rebuilt when what it
// depends on (the TLS settings of the spec) changes, so connections to an
// extension API server are reused across requests.
type transports struct {
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	client tls.Certificate
	mu     sync.Mutex
	byName map[string]cachedTransport
}

type cachedTransport struct {
	key string
	rt  *http.Transport
	err error
}

// transportKey is everything of an APIService its transport depends on.
func transportKey(s *apiregistrationv1.APIService) string {
	return fmt.Sprintf("%s/%s/%t/%x", s.Spec.Service.Namespace, s.Spec.Service.Name, s.Spec.InsecureSkipTLSVerify, s.Spec.CABundle)
}

// forAPIService is upstream's BuildTransportConfig as a transport: the
// backend's certificate verified against spec.caBundle for the name
// <service>.<namespace>.svc (unless insecureSkipTLSVerify), and the
// front-proxy client certificate presented.
func (t *transports) forAPIService(s *apiregistrationv1.APIService) (http.RoundTripper, error) {
	key := transportKey(s)
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.byName[s.Name]; ok && c.key == key {
		return c.rt, c.err
	}
	if old, ok := t.byName[s.Name]; ok && old.rt != nil {
		old.rt.CloseIdleConnections()
	}
	rt, err := t.build(s)
	t.byName[s.Name] = cachedTransport{key: key, rt: rt, err: err}
	return rt, err
}

func (t *transports) build(s *apiregistrationv1.APIService) (*http.Transport, error) {
	tc := &tls.Config{
		ServerName:         s.Spec.Service.Name + "." + s.Spec.Service.Namespace + ".svc",
		InsecureSkipVerify: s.Spec.InsecureSkipTLSVerify,
		MinVersion:         tls.VersionTLS12,
	}
	if len(t.client.Certificate) > 0 {
		tc.Certificates = []tls.Certificate{t.client}
	}
	if len(s.Spec.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(s.Spec.CABundle) {
			return nil, fmt.Errorf("unable to load root certificates: unable to parse bytes as PEM block")
		}
		tc.RootCAs = pool
	}
	// HTTP/1.1 only: upgrades (exec-style streams) pass through a
	// ReverseProxy on HTTP/1.1 connections.
	return &http.Transport{
		DialContext:         t.dial,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 25,
	}, nil
}

// forget drops the transport of a deleted APIService.
func (t *transports) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.byName[name]; ok && c.rt != nil {
		c.rt.CloseIdleConnections()
	}
	delete(t.byName, name)
}

// setIdentity replaces whatever identity headers the client sent with the
// caller's identity, as upstream's auth proxy round tripper does: the
// extension API server trusts them because the front-proxy certificate
// vouches for the connection, so nothing the client sends may pass.
func setIdentity(req *http.Request, u *auth.User) {
	for k := range req.Header {
		lk := strings.ToLower(k)
		if lk == "authorization" || strings.HasPrefix(lk, "impersonate-") {
			req.Header.Del(k)
		}
	}
	transport.SetAuthProxyHeaders(req, u.Name, u.UID, u.Groups, u.Extra)
}

// proxyHandler forwards requests of one remote APIService's group-version
// (upstream's proxyHandler).
type proxyHandler struct {
	api        *apiregistrationv1.APIService
	resolver   resolver
	transports *transports
	log        *slog.Logger
}

func (p *proxyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !available(p.api) {
		writeStatus(w, apierrors.NewServiceUnavailable(errServiceUnavailable.Error()))
		return
	}
	user := auth.UserFrom(r.Context())
	if user == nil {
		writeStatus(w, apierrors.NewInternalError(errors.New("missing user")))
		return
	}
	rt, err := p.transports.forAPIService(p.api)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	svc := p.api.Spec.Service
	host, err := p.resolver.resolve(svc.Namespace, svc.Name, servicePort(p.api))
	if err != nil {
		p.log.Debug("cannot resolve the service of an APIService", "apiservice", p.api.Name, "err", err)
		writeStatus(w, apierrors.NewServiceUnavailable(errServiceUnavailable.Error()))
		return
	}
	target := &url.URL{Scheme: "https", Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	rp := &httputil.ReverseProxy{
		Transport: rt,
		// Watches and other streams reach the client as they come.
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = ""
			setIdentity(pr.Out, user)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.log.Debug("extension API server unreachable", "apiservice", p.api.Name, "err", err)
			writeStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
		},
	}
	rp.ServeHTTP(w, r)
}

// servicePort is spec.service.port, 443 when unset (the default).
func servicePort(s *apiregistrationv1.APIService) int32 {
	if s.Spec.Service.Port != nil {
		return *s.Spec.Service.Port
	}
	return 443
}

// writeStatus writes err as the metav1.Status clients expect.
func writeStatus(w http.ResponseWriter, err apierrors.APIStatus) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	b, mErr := json.Marshal(st)
	if mErr != nil {
		http.Error(w, st.Message, int(st.Code))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(st.Code))
	w.Write(b)
}
