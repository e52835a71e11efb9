package apiserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
)

// Fake cluster addresses (TEST-NET-1): every dial to them is mapped to a
// local listener, and a dial to anything unmapped fails, so no test
// traffic leaves the machine.
const (
	webPodIP  = "192.0.2.10"
	tlsPodIP  = "192.0.2.11"
	nodeAddr  = "192.0.2.1"
	otherAddr = "192.0.2.12"
)

// echoed is what the echo backend saw.
type echoed struct {
	Method, Path, Query, Host, Authorization, ForwardedFor, ForwardedURI, Impersonate string
}

var wsEcho = websocket.Upgrader{}

// echoBackend stands in for a pod: it echoes the request as JSON, serves
// redirects and an HTML page with links, and echoes WebSocket messages.
func echoBackend(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/redirect":
		http.Redirect(w, r, "/landing/", http.StatusFound)
		return
	case "/redirect-self":
		w.Header().Set("Location", "http://"+r.Host+"/here")
		w.WriteHeader(http.StatusFound)
		return
	case "/redirect-away":
		w.Header().Set("Location", "http://example.invalid/away")
		w.WriteHeader(http.StatusFound)
		return
	case "/page":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		fmt.Fprint(w, `<a href="/rewriteme">test</a><img src="rel.png"><a href="http://example.invalid/x">out</a>`)
		return
	case "/ws":
		ws, err := wsEcho.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			ws.WriteMessage(typ, append([]byte("pod: "), msg...))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(echoed{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host,
		Authorization: r.Header.Get("Authorization"), ForwardedFor: r.Header.Get("X-Forwarded-For"),
		ForwardedURI: r.Header.Get("X-Forwarded-Uri"), Impersonate: r.Header.Get("Impersonate-User")})
}

// recordingAuthz allows everything and remembers proxy requests' attributes.
type recordingAuthz struct {
	mu   sync.Mutex
	seen []auth.Attributes
}

func (a *recordingAuthz) Authorize(_ context.Context, at auth.Attributes) (bool, string, error) {
	if at.Subresource == "proxy" {
		a.mu.Lock()
		a.seen = append(a.seen, at)
		a.mu.Unlock()
	}
	return true, "", nil
}

func (a *recordingAuthz) last(t *testing.T) auth.Attributes {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		t.Fatal("no proxy request was authorized")
	}
	return a.seen[len(a.seen)-1]
}

type backendEnv struct {
	url     string
	client  kubernetes.Interface
	authz   *recordingAuthz
	kubelet *nodeKubelet
}

// newBackendEnv runs an API server whose proxy dials the fake addresses:
// webPodIP:80 and :8080 to a plain echo backend, tlsPodIP:443 to a TLS
// one, nodeAddr's kubelet port to a fake kubelet.
func newBackendEnv(t *testing.T) *backendEnv {
	t.Helper()
	base := apitest.Start(t, apitest.Options{})
	ca := newProxyCA(t)
	web := httptest.NewServer(http.HandlerFunc(echoBackend))
	secure := httptest.NewTLSServer(http.HandlerFunc(echoBackend))
	t.Cleanup(func() { web.CloseClientConnections(); web.Close(); secure.CloseClientConnections(); secure.Close() })
	kl := startNodeKubelet(t, ca, net.ParseIP(nodeAddr))
	routes := map[string]string{
		webPodIP + ":80":    web.Listener.Addr().String(),
		webPodIP + ":8080":  web.Listener.Addr().String(),
		tlsPodIP + ":443":   secure.Listener.Addr().String(),
		nodeAddr + ":10250": kl.srv.Listener.Addr().String(),
		nodeAddr + ":9100":  web.Listener.Addr().String(),
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := routes[addr]
		if !ok {
			return nil, fmt.Errorf("dial %s: connection refused", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
	certs := &apiserver.KubeletClientCert{Dir: t.TempDir(), Issuer: ca, Roots: ca.pool()}
	kp, err := apiserver.NewKubeletProxy(apiserver.KubeletClientConfig{RootCAs: ca.pool(), ClientCertificate: certs.Get, DialContext: dial, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	authz := &recordingAuthz{}
	api, err := apiserver.New(apiserver.Config{Registry: base.Registry, Storage: base.Storage, Authenticator: headerUser{}, Authorizer: authz, Kubelet: kp})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(api.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	env := &backendEnv{url: srv.URL, authz: authz, kubelet: kl,
		client: kubernetes.NewForConfigOrDie(base.Config(&auth.User{Name: "admin", Groups: []string{auth.GroupMasters}}))}
	ctx := context.Background()
	if _, err := env.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.pod(t, "web", webPodIP, 80)
	env.pod(t, "secure", tlsPodIP, 443)
	env.pod(t, "other", otherAddr, 80)
	env.pod(t, "portless", webPodIP)
	env.pod(t, "pending", "", 80)
	env.pod(t, "loopback", "127.0.0.1", 80)
	n, err := env.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeAddr}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	if _, err := env.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env
}

// pod creates a pod with the given IP ("" for none) and container ports.
func (env *backendEnv) pod(t *testing.T, name, ip string, ports ...int32) {
	t.Helper()
	ctx := context.Background()
	c := corev1.Container{Name: "c", Image: "agnhost"}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: p})
	}
	p, err := env.client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip == "" {
		return
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if _, err := env.client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// service creates a Service with ports (name → port) and an EndpointSlice
// whose endpoints are the given pods, ready or not.
func (env *backendEnv) service(t *testing.T, name string, ports []corev1.ServicePort, slicePorts map[string]int32, eps ...discoveryv1.Endpoint) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if slicePorts == nil {
		return
	}
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	for n, p := range slicePorts {
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(n), Port: ptr.To(p), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	if _, err := env.client.DiscoveryV1().EndpointSlices("default").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func endpoint(pod, ip string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod}}
}

type proxyResponse struct {
	code   int
	header http.Header
	body   string
}

func (env *backendEnv) do(t *testing.T, method, path string, header http.Header) proxyResponse {
	t.Helper()
	req, _ := http.NewRequest(method, env.url+path, strings.NewReader(""))
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer secret-of-the-user")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return proxyResponse{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func decodeEcho(t *testing.T, r proxyResponse) echoed {
	t.Helper()
	var e echoed
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("status %d, body %q is not the backend's echo", r.code, r.body)
	}
	return e
}

func TestPodProxy_ForwardsToThePodIP(t *testing.T) {
	env := newBackendEnv(t)
	const pods = "/api/v1/namespaces/default/pods/"
	tests := []struct {
		name, method, path  string
		wantPath, wantQuery string
	}{
		{"path below proxy is kept", http.MethodGet, pods + "web/proxy/some/path/with/GET", "/some/path/with/GET", ""},
		{"trailing slash is kept", http.MethodGet, pods + "web/proxy/dir/", "/dir/", ""},
		{"root path", http.MethodGet, pods + "web/proxy/", "/", ""},
		{"query passes through", http.MethodGet, pods + "web/proxy/q?method=GET&x=1", "/q", "method=GET&x=1"},
		{"explicit port", http.MethodGet, pods + "web:8080/proxy/p", "/p", ""},
		{"scheme, name and port", http.MethodGet, pods + "http:web:8080/proxy/p", "/p", ""},
		{"https to the pod", http.MethodGet, pods + "https:secure:443/proxy/tls", "/tls", ""},
		{"no port and no container port is port 80", http.MethodGet, pods + "portless/proxy/", "/", ""},
		{"POST with an empty path reaches the root", http.MethodPost, pods + "web/proxy?method=POST", "/", "method=POST"},
		{"DELETE", http.MethodDelete, pods + "web/proxy/some/path/with/DELETE", "/some/path/with/DELETE", ""},
		{"OPTIONS", http.MethodOptions, pods + "web/proxy/some/path/with/OPTIONS", "/some/path/with/OPTIONS", ""},
		{"PATCH", http.MethodPatch, pods + "web/proxy/p", "/p", ""},
		{"PUT", http.MethodPut, pods + "web/proxy/p", "/p", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := env.do(t, tt.method, tt.path, http.Header{"Impersonate-User": {"someone"}})
			if r.code != http.StatusOK {
				t.Fatalf("status %d: %s", r.code, r.body)
			}
			e := decodeEcho(t, r)
			if e.Method != tt.method || e.Path != tt.wantPath || e.Query != tt.wantQuery {
				t.Fatalf("backend saw %s %s?%s, want %s %s?%s", e.Method, e.Path, e.Query, tt.method, tt.wantPath, tt.wantQuery)
			}
			if e.Authorization != "" || e.Impersonate != "" {
				t.Fatalf("credentials reached the pod: Authorization %q, Impersonate-User %q", e.Authorization, e.Impersonate)
			}
			if e.ForwardedFor == "" {
				t.Fatal("no X-Forwarded-For")
			}
		})
	}
}

func TestPodProxy_HEADReachesThePod(t *testing.T) {
	env := newBackendEnv(t)
	r := env.do(t, http.MethodHead, "/api/v1/namespaces/default/pods/web/proxy/x", nil)
	if r.code != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, headers %v", r.code, r.header)
	}
}

func TestProxy_EmptyPathGETIsRedirectedBelowProxy(t *testing.T) {
	env := newBackendEnv(t)
	env.service(t, "svc", []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}, map[string]int32{"": 80}, endpoint("web", webPodIP, true))
	for _, path := range []string{"/api/v1/namespaces/default/pods/web/proxy", "/api/v1/namespaces/default/services/svc/proxy"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			t.Run(method+" "+path, func(t *testing.T) {
				r := env.do(t, method, path+"?method="+method, nil)
				if r.code != http.StatusMovedPermanently || r.header.Get("Location") != path+"/?method="+method {
					t.Fatalf("status %d Location %q, want 301 to %s/?method=%s", r.code, r.header.Get("Location"), path, method)
				}
			})
		}
	}
}

func TestPodProxy_RewritesLinksToTheBackend(t *testing.T) {
	env := newBackendEnv(t)
	const prefix = "/api/v1/namespaces/default/pods/web:8080/proxy"
	tests := []struct {
		name, path, wantLocation, wantBody string
	}{
		{"a redirect to a path goes through the proxy", "/redirect", prefix + "/landing/", ""},
		{"a redirect to the request's own host loses nothing but the path prefix", "/redirect-self", "", ""},
		{"a redirect elsewhere is kept", "/redirect-away", "http://example.invalid/away", ""},
		{"absolute links in HTML go through the proxy, others are kept", "/page", "",
			`<a href="` + prefix + `/rewriteme">test</a><img src="rel.png"><a href="http://example.invalid/x">out</a>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := env.do(t, http.MethodGet, prefix+tt.path, nil)
			loc := r.header.Get("Location")
			switch {
			case tt.wantBody != "":
				if r.code != http.StatusOK || r.body != tt.wantBody {
					t.Fatalf("status %d body %q, want %q", r.code, r.body, tt.wantBody)
				}
				if r.header.Get("Access-Control-Allow-Origin") != "" {
					t.Fatal("the backend's CORS headers were passed on")
				}
			case tt.wantLocation != "":
				if r.code != http.StatusFound || loc != tt.wantLocation {
					t.Fatalf("status %d Location %q, want 302 to %q", r.code, loc, tt.wantLocation)
				}
			default:
				host := strings.TrimPrefix(env.url, "https://")
				if r.code != http.StatusFound || loc != "http://"+host+prefix+"/here" {
					t.Fatalf("status %d Location %q, want http://%s%s/here", r.code, loc, host, prefix)
				}
			}
		})
	}
}

func TestPodProxy_HTTPSPodPageLinksNameTheSchemePath(t *testing.T) {
	env := newBackendEnv(t)
	const prefix = "/api/v1/namespaces/default/pods/https:secure:443/proxy"
	r := env.do(t, http.MethodGet, prefix+"/page", nil)
	if want := `<a href="` + prefix + `/rewriteme">`; r.code != http.StatusOK || !strings.HasPrefix(r.body, want) {
		t.Fatalf("status %d body %q, want it to start with %q", r.code, r.body, want)
	}
}

func TestProxy_RefusesAsUpstream(t *testing.T) {
	env := newBackendEnv(t)
	env.service(t, "ready", []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}, map[string]int32{"http": 8080},
		endpoint("web", webPodIP, true))
	env.service(t, "unready", []corev1.ServicePort{{Name: "http", Port: 80}}, map[string]int32{"http": 80}, endpoint("web", webPodIP, false))
	env.service(t, "noslice", []corev1.ServicePort{{Name: "http", Port: 80}}, nil)
	env.service(t, "impostor", []corev1.ServicePort{{Name: "http", Port: 80}}, map[string]int32{"http": 80}, endpoint("web", "192.0.2.99", true))
	const ns = "/api/v1/namespaces/default/"
	tests := []struct {
		name, method, path string
		wantCode           int
		wantMessage        string
	}{
		{"missing pod", http.MethodGet, ns + "pods/nope/proxy/", 404, `pods "nope" not found`},
		{"pod without an IP", http.MethodGet, ns + "pods/pending/proxy/", 400, "address not allowed"},
		{"pod on a loopback address", http.MethodGet, ns + "pods/loopback/proxy/", 400, "address not allowed"},
		{"too many colons", http.MethodGet, ns + "pods/a:b:c:d/proxy/", 400, `invalid pod request "a:b:c:d"`},
		{"unknown scheme", http.MethodGet, ns + "pods/ftp:web:21/proxy/", 400, `invalid pod request "ftp:web:21"`},
		{"unreachable pod", http.MethodGet, ns + "pods/other/proxy/", 503, "error trying to reach service"},
		{"service without endpoint slices", http.MethodGet, ns + "services/noslice/proxy/", 503, `no endpoints available for service "noslice"`},
		{"service whose endpoints are not ready", http.MethodGet, ns + "services/unready/proxy/", 503, `no endpoints available for service "unready"`},
		{"endpoint that is not the pod's address", http.MethodGet, ns + "services/impostor/proxy/", 503, `no endpoints available for service "impostor"`},
		{"service port number that does not exist", http.MethodGet, ns + "services/ready:81/proxy/", 503, `no service port 81 found for service "ready"`},
		{"unknown service port name", http.MethodGet, ns + "services/ready:nope/proxy/", 503, `no endpoints available for service "ready"`},
		{"missing service by port number", http.MethodGet, ns + "services/gone:80/proxy/", 404, `services "gone" not found`},
		{"unknown method", "TRACE", ns + "pods/web/proxy/", 405, ""},
		{"missing node", http.MethodGet, "/api/v1/nodes/nope/proxy/healthz", 404, `nodes "nope" not found`},
		{"proxy of a resource that has none", http.MethodGet, ns + "configmaps/x/proxy/", 404, ""},
		{"legacy watch path", http.MethodGet, "/api/v1/watch/namespaces/default/pods/web/proxy", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := env.do(t, tt.method, tt.path, nil)
			if r.code != tt.wantCode {
				t.Fatalf("status %d (%s), want %d", r.code, r.body, tt.wantCode)
			}
			if !strings.Contains(statusMessage(t, r.body), tt.wantMessage) {
				t.Fatalf("message %q, want it to contain %q", statusMessage(t, r.body), tt.wantMessage)
			}
		})
	}
}

func TestServiceProxy_PicksAReadyEndpointOfThePort(t *testing.T) {
	env := newBackendEnv(t)
	env.service(t, "multi", []corev1.ServicePort{
		{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
		{Name: "alt", Port: 81, TargetPort: intstr.FromInt32(8080)},
		{Name: "tls", Port: 443, TargetPort: intstr.FromInt32(443)},
	}, nil)
	ctx := context.Background()
	for _, sl := range []discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "multi-a", Labels: map[string]string{discoveryv1.LabelServiceName: "multi"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}, {Name: ptr.To("alt"), Port: ptr.To[int32](8080)}},
			Endpoints: []discoveryv1.Endpoint{endpoint("other", otherAddr, false), endpoint("web", webPodIP, true)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "multi-b", Labels: map[string]string{discoveryv1.LabelServiceName: "multi"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("tls"), Port: ptr.To[int32](443)}}, Endpoints: []discoveryv1.Endpoint{endpoint("secure", tlsPodIP, true)}},
	} {
		if _, err := env.client.DiscoveryV1().EndpointSlices("default").Create(ctx, &sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const svc = "/api/v1/namespaces/default/services/"
	tests := []struct{ name, path, wantPath string }{
		{"port by name", svc + "multi:http/proxy/a", "/a"},
		{"port by number maps to its name", svc + "multi:81/proxy/b", "/b"},
		{"http scheme", svc + "http:multi:alt/proxy/c", "/c"},
		{"https scheme", svc + "https:multi:tls/proxy/d", "/d"},
		{"https scheme with the port number", svc + "https:multi:443/proxy/e/", "/e/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The unready endpoint is never chosen, whatever the random start.
			for range 5 {
				r := env.do(t, http.MethodGet, tt.path, nil)
				if r.code != http.StatusOK {
					t.Fatalf("status %d: %s", r.code, r.body)
				}
				if e := decodeEcho(t, r); e.Path != tt.wantPath {
					t.Fatalf("backend saw %s, want %s", e.Path, tt.wantPath)
				}
			}
		})
	}
}

func TestProxy_UpgradesPassThroughToThePod(t *testing.T) {
	env := newBackendEnv(t)
	env.service(t, "svc", []corev1.ServicePort{{Name: "http", Port: 80}}, map[string]int32{"http": 80}, endpoint("web", webPodIP, true))
	for _, path := range []string{"/api/v1/namespaces/default/pods/web/proxy/ws", "/api/v1/namespaces/default/services/svc:http/proxy/ws"} {
		t.Run(path, func(t *testing.T) {
			d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, HandshakeTimeout: 5 * time.Second}
			ws, resp, err := d.Dial(strings.Replace(env.url, "https://", "wss://", 1)+path, nil)
			if err != nil {
				t.Fatalf("dial: %v %v", err, resp)
			}
			defer ws.Close()
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			ws.WriteMessage(websocket.TextMessage, []byte("hello"))
			_, msg, err := ws.ReadMessage()
			if err != nil || string(msg) != "pod: hello" {
				t.Fatalf("read %q, %v", msg, err)
			}
		})
	}
}

func TestProxy_AuthorizesTheMethodAsUpstreamVerbs(t *testing.T) {
	env := newBackendEnv(t)
	tests := []struct {
		method, path                                    string
		wantVerb, wantResource, wantName, wantNamespace string
	}{
		{http.MethodGet, "/api/v1/namespaces/default/pods/web/proxy/x?watch=true", "get", "pods", "web", "default"},
		{http.MethodHead, "/api/v1/namespaces/default/pods/web/proxy/x", "get", "pods", "web", "default"},
		{http.MethodPost, "/api/v1/namespaces/default/pods/web:8080/proxy/x", "create", "pods", "web:8080", "default"},
		{http.MethodPut, "/api/v1/namespaces/default/services/https:svc:443/proxy/", "update", "services", "https:svc:443", "default"},
		{http.MethodPatch, "/api/v1/namespaces/default/pods/web/proxy", "patch", "pods", "web", "default"},
		{http.MethodDelete, "/api/v1/nodes/node-a/proxy/healthz", "delete", "nodes", "node-a", ""},
		{http.MethodOptions, "/api/v1/namespaces/default/pods/web/proxy/x", "", "pods", "web", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			env.do(t, tt.method, tt.path, nil)
			a := env.authz.last(t)
			if a.Verb != tt.wantVerb || a.Resource != tt.wantResource || a.Subresource != "proxy" || a.Name != tt.wantName ||
				a.Namespace != tt.wantNamespace || !a.ResourceRequest || a.APIVersion != "v1" {
				t.Fatalf("attributes %+v; want verb %q on %s/proxy %q in %q", a, tt.wantVerb, tt.wantResource, tt.wantName, tt.wantNamespace)
			}
		})
	}
}

func TestNodeProxy_ReachesTheKubeletWithTheClientCertificate(t *testing.T) {
	env := newBackendEnv(t)
	r := env.do(t, http.MethodGet, "/api/v1/nodes/node-a/proxy/healthz?verbose", nil)
	if r.code != http.StatusOK || r.body != "kubelet ok" {
		t.Fatalf("status %d body %q", r.code, r.body)
	}
	call := env.kubelet.last(t)
	if call.path != "/healthz" || call.query != "verbose" || call.clientCN != apiserver.KubeletClientCN || call.authorization != "" {
		t.Fatalf("kubelet saw %+v", call)
	}
	// The explicit kubelet port is the kubelet too; another port is a
	// plain backend on the node.
	if r := env.do(t, http.MethodGet, "/api/v1/nodes/node-a:10250/proxy/pods", nil); r.code != http.StatusOK || env.kubelet.last(t).path != "/pods" {
		t.Fatalf("explicit kubelet port: status %d body %q", r.code, r.body)
	}
	if e := decodeEcho(t, env.do(t, http.MethodGet, "/api/v1/nodes/node-a:9100/proxy/metrics", nil)); e.Path != "/metrics" {
		t.Fatalf("node port 9100 saw %+v", e)
	}
}

func TestDiscovery_ListsTheProxySubresources(t *testing.T) {
	env := newBackendEnv(t)
	list, err := env.client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pods/proxy": "PodProxyOptions", "services/proxy": "ServiceProxyOptions", "nodes/proxy": "NodeProxyOptions"}
	for _, r := range list.APIResources {
		if kind, ok := want[r.Name]; ok {
			if r.Kind != kind || strings.Join(r.Verbs, ",") != "create,delete,get,patch,update" {
				t.Fatalf("%s: kind %s verbs %v", r.Name, r.Kind, r.Verbs)
			}
			delete(want, r.Name)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not listed: %v", want)
	}
}

// nodeKubelet is a fake kubelet serving on a certificate for the node's
// address; it answers /healthz and /pods and records what it saw.
type nodeKubelet struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []kubeletCall
}

func startNodeKubelet(t *testing.T, ca *proxyCA, ip net.IP) *nodeKubelet {
	t.Helper()
	nk := &nodeKubelet{}
	nk.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nk.mu.Lock()
		nk.calls = append(nk.calls, kubeletCall{path: r.URL.Path, query: r.URL.RawQuery,
			clientCN: r.TLS.PeerCertificates[0].Subject.CommonName, authorization: r.Header.Get("Authorization")})
		nk.mu.Unlock()
		switch r.URL.Path {
		case "/healthz":
			fmt.Fprint(w, "kubelet ok")
		case "/pods":
			fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "node-a"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{ip}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	nk.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool()}
	nk.srv.StartTLS()
	t.Cleanup(func() { nk.srv.CloseClientConnections(); nk.srv.Close() })
	return nk
}

func (nk *nodeKubelet) last(t *testing.T) kubeletCall {
	t.Helper()
	nk.mu.Lock()
	defer nk.mu.Unlock()
	if len(nk.calls) == 0 {
		t.Fatal("the kubelet saw no request")
	}
	return nk.calls[len(nk.calls)-1]
}

// kubectl proxy's conformance test reads "/api/" through the proxy.
func TestDiscovery_RootsWithATrailingSlashAreTheRoots(t *testing.T) {
	env := newBackendEnv(t)
	r := env.do(t, http.MethodGet, "/api/", nil)
	var versions metav1.APIVersions
	if err := json.Unmarshal([]byte(r.body), &versions); r.code != http.StatusOK || err != nil || len(versions.Versions) == 0 || versions.Versions[0] != "v1" {
		t.Fatalf("/api/: status %d body %s", r.code, r.body)
	}
	r = env.do(t, http.MethodGet, "/apis/", nil)
	var groups metav1.APIGroupList
	if err := json.Unmarshal([]byte(r.body), &groups); r.code != http.StatusOK || err != nil || groups.Kind != "APIGroupList" || len(groups.Groups) == 0 {
		t.Fatalf("/apis/: status %d body %s", r.code, r.body)
	}
}
