package aggregator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	unstructuredv1 "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
	"skiff/server/controller/controllertest"
	"skiff/server/defaults"
	"skiff/server/registry"
	"skiff/server/validation"
)

// env is a real API server with the APIService row, an aggregator running
// against it, and the fake extension API server behind
// v1alpha1.wardle.example.com.
type env struct {
	ctx     context.Context
	srv     *apitest.Server
	backend *backend
	client  kubernetes.Interface
	api     *apiServices
	agg     *Aggregator
}

var system = &auth.User{Name: "system:apiserver", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}

// wardle answers as the sample API server does: aggregated discovery at
// /apis, its group-version's resources, and flunders lists that report
// what identity and client certificate reached it.
func wardle() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis":
			w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
			w.Write([]byte(`{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[{"metadata":{"name":"wardle.example.com"},"versions":[{"version":"v1alpha1","resources":[{"resource":"flunders","singularResource":"flunder","scope":"Namespaced","responseKind":{"group":"wardle.example.com","version":"v1alpha1","kind":"Flunder"},"verbs":["create","delete","get","list"]}]}]}]}`))
		case "/apis/wardle.example.com/v1alpha1":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"wardle.example.com/v1alpha1","resources":[{"name":"flunders","namespaced":true,"kind":"Flunder","verbs":["get","list"]}]}`))
		case "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders":
			cn := ""
			if len(r.TLS.PeerCertificates) > 0 {
				cn = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"kind": "FlunderList", "apiVersion": "wardle.example.com/v1alpha1",
				"metadata": map[string]any{"annotations-seen": map[string]any{"user": r.Header.Get("X-Remote-User"), "groups": r.Header.Values("X-Remote-Group"),
					"extra": r.Header.Values("X-Remote-Extra-Team"), "authorization": r.Header.Get("Authorization"), "cn": cn}}, "items": []any{}})
		default:
			http.NotFound(w, r)
		}
	})
}

func startEnv(t *testing.T) *env {
	t.Helper()
	srv := apitest.Start(t, apitest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	for _, r := range registry.APIRegistration(registry.Hooks{Default: defaults.Apply, Validate: validation.Validate, ValidateUpdate: validation.ValidateUpdate}) {
		if err := srv.Registry.Add(r); err != nil {
			t.Fatal(err)
		}
		if err := srv.Storage.Cache().AddResource(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	b := newBackend(t, wardle())
	cfg := srv.Config(system)
	client := kubernetes.NewForConfigOrDie(cfg)
	for _, ns := range []string{"kube-system", testNamespace} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().Services(testNamespace).Create(ctx, sampleService(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(testNamespace).Create(ctx, sampleSlice(true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg, err := New(Config{REST: cfg, Client: client, Registry: srv.Registry, ProxyClientCert: b.frontProxy.ClientCertificate(),
		ClientCA: []byte("cluster-ca"), RequestHeaderCA: b.frontProxy.CACertPEM(), Dial: b.dial,
		Logger: controllertest.Logger(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	srv.API.SetAggregator(agg)
	controllertest.Run(t, ctx, agg.Run)
	api, err := newAPIServices(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{ctx: ctx, srv: srv, backend: b, client: client, api: api, agg: agg}
}

// waitAvailable waits for the Available condition of name to have reason.
func (e *env) waitAvailable(t *testing.T, name, reason string) *apiregistrationv1.APIService {
	t.Helper()
	var last *apiregistrationv1.APIService
	controllertest.Eventually(t, e.ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		list, err := e.api.list(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		last = &list.Items[0]
		c := condition(last, apiregistrationv1.Available)
		return c != nil && c.Reason == reason, nil
	}, "APIService %s to be Available with reason %s (last: %+v)", name, reason, &last)
	return last
}

// get requests path in-process as user, with accept.
func (e *env) get(t *testing.T, user *auth.User, path, accept string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, "http://skiff.internal"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("Authorization", "Bearer not-for-the-backend")
	resp, err := e.srv.API.Transport(user).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func TestAggregator_RemoteAPIService_ProxiedWithIdentityAndFrontProxyCert(t *testing.T) {
	e := startEnv(t)
	if _, err := e.api.create(e.ctx, remoteAPIService(e.backend.caBundle)); err != nil {
		t.Fatal(err)
	}
	s := e.waitAvailable(t, "v1alpha1.wardle.example.com", "Passed")
	if c := condition(s, apiregistrationv1.Available); c.Status != apiregistrationv1.ConditionTrue || c.Message != "all checks passed" {
		t.Errorf("condition = %+v", c)
	}
	alice := &auth.User{Name: "alice", Groups: []string{"dev", auth.GroupAuthenticated}, Extra: map[string][]string{"team": {"blue"}}}
	// The proxy follows the APIService through the aggregator's informer,
	// which may see the Available status a moment after the API does.
	var code int
	var body []byte
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body = e.get(t, alice, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders", "application/json")
		if code != http.StatusServiceUnavailable || time.Now().After(end) {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("list flunders: %d %s", code, body)
	}
	var list struct {
		Metadata struct {
			Seen struct {
				User, Authorization, CN string
				Groups, Extra           []string
			} `json:"annotations-seen"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	seen := list.Metadata.Seen
	if seen.User != "alice" || !slices.Equal(seen.Groups, []string{"dev", auth.GroupAuthenticated}) || !slices.Equal(seen.Extra, []string{"blue"}) ||
		seen.CN != "front-proxy-client" || seen.Authorization != "" {
		t.Errorf("the extension server saw %+v", seen)
	}
	// The same request with the dynamic client, as the conformance test does.
	u := &unstructuredv1.UnstructuredList{}
	raw, err := rest.RESTClientFor(withJSON(e.srv.Config(alice)))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Get().AbsPath("/apis/wardle.example.com/v1alpha1/namespaces/default/flunders").Do(e.ctx).Into(u); err != nil {
		t.Errorf("client-go list: %v", err)
	}
}

func withJSON(cfg *rest.Config) *rest.Config {
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.GroupVersion, cfg.APIPath = &schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}, "/apis"
	cfg.NegotiatedSerializer = unstructuredNegotiator{}
	return cfg
}

// unstructuredNegotiator decodes JSON into unstructured objects.
type unstructuredNegotiator struct{}

func (unstructuredNegotiator) SupportedMediaTypes() []runtime.SerializerInfo {
	s := unstructuredv1.UnstructuredJSONScheme
	return []runtime.SerializerInfo{{MediaType: "application/json", MediaTypeType: "application", MediaTypeSubType: "json", EncodesAsText: true, Serializer: s}}
}
func (unstructuredNegotiator) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}
func (unstructuredNegotiator) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

func TestAggregator_UnavailableAPIService_503WhileTheRestOfDiscoveryWorks(t *testing.T) {
	e := startEnv(t)
	if _, err := e.api.create(e.ctx, remoteAPIService(e.backend.caBundle)); err != nil {
		t.Fatal(err)
	}
	broken := remoteAPIService(nil)
	broken.Name, broken.Spec.Group, broken.Spec.Version = "v1beta1.broken.example.com", "broken.example.com", "v1beta1"
	broken.Spec.InsecureSkipTLSVerify = true
	broken.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: testNamespace, Name: "missing", Port: ptr.To[int32](443)}
	if _, err := e.api.create(e.ctx, broken); err != nil {
		t.Fatal(err)
	}
	e.waitAvailable(t, "v1alpha1.wardle.example.com", "Passed")
	s := e.waitAvailable(t, "v1beta1.broken.example.com", "ServiceNotFound")
	if c := condition(s, apiregistrationv1.Available); c.Status != apiregistrationv1.ConditionFalse || c.Message != `service/missing in "wardle" is not present` {
		t.Errorf("condition = %+v", c)
	}
	for _, path := range []string{"/apis/broken.example.com/v1beta1", "/apis/broken.example.com/v1beta1/namespaces/default/foos"} {
		code, body := e.get(t, system, path, "application/json")
		var st metav1.Status
		_ = json.Unmarshal(body, &st)
		if code != http.StatusServiceUnavailable || st.Kind != "Status" || st.Reason != metav1.StatusReasonServiceUnavailable {
			t.Errorf("GET %s = %d %s, want a 503 Status", path, code, body)
		}
	}
	if code, body := e.get(t, system, "/apis/apps/v1", "application/json"); code != http.StatusOK {
		t.Errorf("GET /apis/apps/v1 = %d %s", code, body)
	}
	// Aggregated discovery: the broken version is Stale, the others are
	// current, and wardle's resources come from its server.
	var list apidiscoveryv2.APIGroupDiscoveryList
	controllertest.Eventually(t, e.ctx, 20*time.Second, func(context.Context) (bool, error) {
		code, body := e.get(t, system, "/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		if code != http.StatusOK {
			return false, nil
		}
		list = apidiscoveryv2.APIGroupDiscoveryList{}
		if err := json.Unmarshal(body, &list); err != nil {
			return false, err
		}
		v := findVersion(list, "wardle.example.com", "v1alpha1")
		return v != nil && len(v.Resources) == 1, nil
	}, "wardle's resources in aggregated discovery")
	if v := findVersion(list, "wardle.example.com", "v1alpha1"); v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent || v.Resources[0].Resource != "flunders" {
		t.Errorf("wardle = %+v", v)
	}
	if v := findVersion(list, "broken.example.com", "v1beta1"); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale {
		t.Errorf("broken = %+v, want listed Stale", v)
	}
	if v := findVersion(list, "apps", "v1"); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent || len(v.Resources) == 0 {
		t.Errorf("apps/v1 = %+v", v)
	}
	if list.Items[0].Name != "apiregistration.k8s.io" {
		t.Errorf("first group is %s, want apiregistration.k8s.io (upstream puts the aggregator's own group first)", list.Items[0].Name)
	}
	// Legacy discovery lists both remote groups (as upstream, available
	// or not), and serves /apis/<group> for them.
	code, body := e.get(t, system, "/apis", "application/json")
	var groups metav1.APIGroupList
	if err := json.Unmarshal(body, &groups); code != http.StatusOK || err != nil {
		t.Fatalf("/apis: %d %v", code, err)
	}
	names := map[string]int{}
	for i, g := range groups.Groups {
		names[g.Name] = i
	}
	for _, g := range []string{"wardle.example.com", "broken.example.com", "apps"} {
		if _, ok := names[g]; !ok {
			t.Errorf("/apis lacks %s", g)
		}
	}
	// groupPriorityMinimum 2000 puts wardle after the built-in groups.
	if names["apps"] > names["wardle.example.com"] {
		t.Errorf("apps at %d after wardle at %d", names["apps"], names["wardle.example.com"])
	}
	if code, body := e.get(t, system, "/apis/broken.example.com", "application/json"); code != http.StatusOK {
		t.Errorf("/apis/broken.example.com = %d %s", code, body)
	}
}

func findVersion(list apidiscoveryv2.APIGroupDiscoveryList, group, version string) *apidiscoveryv2.APIVersionDiscovery {
	for _, g := range list.Items {
		if g.Name != group {
			continue
		}
		for i := range g.Versions {
			if g.Versions[i].Version == version {
				return &g.Versions[i]
			}
		}
	}
	return nil
}

func TestAggregator_LocalAPIServices_FollowTheRegistry(t *testing.T) {
	e := startEnv(t)
	e.waitAvailable(t, "v1.apps", "Local")
	crd := res("stable.example.com", "v1", "crontabs", true)
	if err := e.srv.Registry.Add(crd); err != nil {
		t.Fatal(err)
	}
	e.agg.Notify()
	s := e.waitAvailable(t, "v1.stable.example.com", "Local")
	if s.Spec.GroupPriorityMinimum != 1000 || s.Spec.VersionPriority != 100 || s.Labels[automanagedLabel] != automanagedTrue {
		t.Errorf("CRD APIService = %+v", s)
	}
	e.srv.Registry.Remove(crd.GVR())
	e.agg.Notify()
	controllertest.Eventually(t, e.ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		list, err := e.api.list(ctx, metav1.ListOptions{FieldSelector: "metadata.name=v1.stable.example.com"})
		return err == nil && len(list.Items) == 0, nil
	}, "the CRD's APIService to be deleted")
	cm, err := e.client.CoreV1().ConfigMaps("kube-system").Get(e.ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		controllertest.Eventually(t, e.ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
			cm, err = e.client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
			return err == nil, nil
		}, "the authentication ConfigMap")
	} else if err != nil {
		t.Fatal(err)
	}
	if cm.Data["requestheader-allowed-names"] != `["front-proxy-client"]` || cm.Data["client-ca-file"] != "cluster-ca" {
		t.Errorf("configmap data = %v", cm.Data)
	}
}
