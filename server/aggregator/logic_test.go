package aggregator

import (
	"context"
	"net/http"
	"sort"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/server/registry"
)

func rows(rs ...*registry.Resource) []*registry.Resource { return rs }

func res(group, version, name string, custom bool) *registry.Resource {
	return &registry.Resource{Group: group, Version: version, Name: name, Kind: "K", Custom: custom,
		New: func() runtime.Object { return nil }, NewList: func() runtime.Object { return nil }}
}

func TestDesiredLocal_Rows_OnePerGroupVersionWithUpstreamPriorities(t *testing.T) {
	got := desiredLocal(rows(res("", "v1", "pods", false), res("", "v1", "services", false), res("apps", "v1", "deployments", false),
		res("autoscaling", "v2", "horizontalpodautoscalers", false), res("stable.example.com", "v1", "crontabs", true),
		res("apiregistration.k8s.io", "v1", "apiservices", false)))
	want := map[string]struct {
		group, managed string
		gp, vp         int32
	}{
		"v1.":                   {"", automanagedOnStart, 18000, 1},
		"v1.apps":               {"apps", automanagedOnStart, 17800, 15},
		"v2.autoscaling":        {"autoscaling", automanagedOnStart, 17500, 30},
		"v1.stable.example.com": {"stable.example.com", automanagedTrue, 1000, 100},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d APIServices %v, want %d", len(got), keys(got), len(want))
	}
	for name, w := range want {
		s := got[name]
		if s == nil || s.Spec.Group != w.group || s.Spec.Service != nil || s.Labels[automanagedLabel] != w.managed ||
			s.Spec.GroupPriorityMinimum != w.gp || s.Spec.VersionPriority != w.vp {
			t.Errorf("%s = %+v", name, s)
		}
	}
}

func keys(m map[string]*apiregistrationv1.APIService) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestPlanLocal_ExistingStates_WritesOnlyWhatDrifted(t *testing.T) {
	desired := desiredLocal(rows(res("apps", "v1", "deployments", false), res("batch", "v1", "jobs", false), res("policy", "v1", "pdbs", false)))
	drifted := desired["v1.batch"].DeepCopy()
	drifted.Spec.VersionPriority = 1
	user := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.policy"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "policy", Version: "v1", Service: &apiregistrationv1.ServiceReference{Namespace: "x", Name: "y"}}}
	gone := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.stable.example.com", Labels: map[string]string{automanagedLabel: automanagedTrue}}}
	plan := planLocal([]*apiregistrationv1.APIService{desired["v1.apps"].DeepCopy(), drifted, user, gone}, desired)
	var got []string
	for _, ch := range plan {
		switch {
		case ch.create != nil:
			got = append(got, "create "+ch.create.Name)
		case ch.update != nil:
			got = append(got, "update "+ch.update.Name)
			if ch.update.Spec.VersionPriority != 15 {
				t.Errorf("update writes versionPriority %d, want 15", ch.update.Spec.VersionPriority)
			}
		case ch.delete != nil:
			got = append(got, "delete "+ch.delete.Name)
		}
	}
	sort.Strings(got)
	want := []string{"delete v1.stable.example.com", "update v1.batch"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("plan = %v, want %v (the user's v1.policy untouched, v1.apps in line)", got, want)
	}
}

func TestLegacyToAggregated_ResourcesAndSubresources_AsUpstream(t *testing.T) {
	got := legacyToAggregated("wardle.example.com", "v1alpha1", []metav1.APIResource{
		{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "list"}},
		{Name: "flunders/status", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "update"}},
		{Name: "fischers", Kind: "Fischer", Verbs: []string{"get"}, ShortNames: []string{"fi"}},
		{Name: "flunders/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: []string{"get"}},
	})
	if got.Version != "v1alpha1" || len(got.Resources) != 2 {
		t.Fatalf("got %+v", got)
	}
	fl, fi := got.Resources[0], got.Resources[1]
	if fl.Resource != "flunders" || fl.Scope != apidiscoveryv2.ScopeNamespace || fl.ResponseKind.Kind != "Flunder" || fl.ResponseKind.Group != "wardle.example.com" {
		t.Errorf("flunders = %+v", fl)
	}
	if len(fl.Subresources) != 2 || fl.Subresources[0].Subresource != "status" || fl.Subresources[1].ResponseKind.Group != "autoscaling" {
		t.Errorf("flunders subresources = %+v", fl.Subresources)
	}
	if fi.Scope != apidiscoveryv2.ScopeCluster || fi.ShortNames[0] != "fi" {
		t.Errorf("fischers = %+v", fi)
	}
}

func TestFetch_AggregatedOrLegacyBackend_SameVersionDiscovery(t *testing.T) {
	aggregated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis" {
			t.Errorf("aggregated backend asked for %s", r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		w.Write([]byte(`{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[{"metadata":{"name":"wardle.example.com"},"versions":[{"version":"v1beta1"},{"version":"v1alpha1","resources":[{"resource":"flunders","scope":"Namespaced","responseKind":{"group":"wardle.example.com","version":"v1alpha1","kind":"Flunder"},"verbs":["get"]}]}]}]}`))
	})
	legacy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"kind":"APIGroupList","groups":[]}`))
			return
		}
		w.Write([]byte(`{"kind":"APIResourceList","groupVersion":"wardle.example.com/v1alpha1","resources":[{"name":"flunders","namespaced":true,"kind":"Flunder","verbs":["get"]}]}`))
	})
	for name, h := range map[string]http.Handler{"aggregated": aggregated, "legacy": legacy} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, h)
			f := &fetcher{resolver: listers(t, sampleService(), sampleSlice(true)), transports: b.transports()}
			v, err := f.fetch(context.Background(), remoteAPIService(b.caBundle))
			if err != nil {
				t.Fatal(err)
			}
			if v.Version != "v1alpha1" || len(v.Resources) != 1 || v.Resources[0].Resource != "flunders" || v.Resources[0].Scope != apidiscoveryv2.ScopeNamespace {
				t.Errorf("discovery = %+v", v)
			}
		})
	}
}

func TestAuthenticationData_WithFrontProxyCA_UpstreamKeys(t *testing.T) {
	data, err := authenticationData([]byte("client-ca"), []byte("proxy-ca"), frontProxyAllowCNs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client-ca-file":                     "client-ca",
		"requestheader-client-ca-file":       "proxy-ca",
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-uid-headers":          `["X-Remote-Uid"]`,
	}
	if len(data) != len(want) {
		t.Errorf("data has %d keys, want %d: %v", len(data), len(want), data)
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("%s = %q, want %q", k, data[k], v)
		}
	}
	onlyClient, _ := authenticationData([]byte("client-ca"), nil, frontProxyAllowCNs)
	if len(onlyClient) != 1 {
		t.Errorf("without a front-proxy CA: %v, want client-ca-file alone", onlyClient)
	}
}
