package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"skiff/server/certs"
)

// The fake extension API server: a TLS server whose certificate is for
// sample-api.wardle.svc (signed by a CA the APIService's caBundle
// carries) and which demands a client certificate of the front-proxy CA.
const (
	testNamespace = "wardle"
	testService   = "sample-api"
	testPodIP     = "10.42.0.7"
	testPort      = 7443
	testTarget    = 443
)

type backend struct {
	srv        *httptest.Server
	caBundle   []byte
	frontProxy *certs.FrontProxy
	// dialed records the addresses the aggregator dialled.
	mu     sync.Mutex
	dialed []string
}

func newBackend(t *testing.T, h http.Handler) *backend {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	bundle, err := certs.Ensure(certs.Config{Dir: dir, Hostname: "test"})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := certs.EnsureFrontProxy(certs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := bundle.IssueServingCert(testService, []string{testService + "." + testNamespace + ".svc"}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(fp.CACertPEM())
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes cut by the test's end
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &backend{srv: srv, caBundle: bundle.CACertPEM(), frontProxy: fp}
}

// dial sends every connection to the fake server, whatever pod address
// was asked for, and records that address.
func (b *backend) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	b.mu.Lock()
	b.dialed = append(b.dialed, addr)
	b.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, b.srv.Listener.Addr().String())
}

func (b *backend) addresses() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialed...)
}

func (b *backend) transports() *transports {
	return &transports{dial: b.dial, client: b.frontProxy.ClientCertificate(), byName: map[string]cachedTransport{}}
}

// remoteAPIService is v1alpha1.wardle.example.com behind the fake server.
func remoteAPIService(caBundle []byte) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com", UID: "uid-1"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "wardle.example.com", Version: "v1alpha1", CABundle: caBundle,
			Service:              &apiregistrationv1.ServiceReference{Namespace: testNamespace, Name: testService, Port: ptr.To[int32](testPort)},
			GroupPriorityMinimum: 2000, VersionPriority: 200,
		},
	}
}

func sampleService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testService},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Port: testPort, TargetPort: intstr.FromInt32(testTarget)}}},
	}
}

func sampleSlice(ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: testNamespace, Name: testService + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: testService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{testPodIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](testTarget)}},
	}
}

// listers serve the objects from indexers, as informers would.
func listers(t *testing.T, objs ...any) resolver {
	t.Helper()
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.Service:
			err = svcs.Add(o)
		case *discoveryv1.EndpointSlice:
			err = slices.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return resolver{services: corelisters.NewServiceLister(svcs), slices: discoverylisters.NewEndpointSliceLister(slices)}
}
