package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/registry"
)

// fakeAggregator serves one remote group-version per entry of remote and
// places local ones by a table.
type fakeAggregator struct {
	remote []RemoteVersion
	prio   map[string][2]int32
	served []string
}

func (f *fakeAggregator) Proxy(group, version string) (http.Handler, bool) {
	for _, rv := range f.remote {
		if rv.Group == group && rv.Version == version {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.served = append(f.served, r.URL.Path)
				w.WriteHeader(http.StatusTeapot)
			}), true
		}
	}
	return nil, false
}

func (f *fakeAggregator) Remote() []RemoteVersion { return f.remote }

func (f *fakeAggregator) Priority(group, version string) (int32, int32) {
	p, ok := f.prio[group+"/"+version]
	if !ok {
		return 1000, 100
	}
	return p[0], p[1]
}

func discoveryServer(t *testing.T, agg Aggregator) *Server {
	t.Helper()
	newRow := func(group, version, name string) *registry.Resource {
		return &registry.Resource{Group: group, Version: version, Name: name, Kind: "K", Verbs: []string{"get"},
			New: func() runtime.Object { return nil }, NewList: func() runtime.Object { return nil }}
	}
	reg, err := registry.New(newRow("autoscaling", "v1", "hpas"), newRow("autoscaling", "v2", "hpas"), newRow("apps", "v1", "deployments"),
		newRow("stable.example.com", "v1beta1", "crontabs"), newRow("stable.example.com", "v1", "crontabs"), newRow("", "v1", "pods"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{reg: reg}
	if agg != nil {
		s.SetAggregator(agg)
	}
	return s
}

func upstreamTable() map[string][2]int32 {
	return map[string][2]int32{"apps/v1": {17800, 15}, "autoscaling/v1": {17500, 15}, "autoscaling/v2": {17500, 30}}
}

func TestMergedGroups_LocalAndRemote_OrderedByPriorities(t *testing.T) {
	agg := &fakeAggregator{prio: upstreamTable(), remote: []RemoteVersion{
		{Group: "wardle.example.com", Version: "v1alpha1", GroupPriority: 2000, VersionPriority: 200},
		{Group: "wardle.example.com", Version: "v1beta1", GroupPriority: 2000, VersionPriority: 100},
		{Group: "metrics.k8s.io", Version: "v1beta1", GroupPriority: 100, VersionPriority: 100, Stale: true},
	}}
	groups := discoveryServer(t, agg).mergedGroups()
	var got []string
	for _, g := range groups {
		s := g.Name + ":" + g.PreferredVersion.Version + ":"
		for _, v := range g.Versions {
			s += v.Version + ","
		}
		got = append(got, s)
	}
	// apps (17800) > autoscaling (17500) > wardle (2000) > the CRD (1000)
	// > metrics (100); v2 beats v1 by priority, v1alpha1 beats v1beta1 by
	// priority, the CRD's equal priorities fall to the kube-aware order.
	want := []string{"apps:v1:v1,", "autoscaling:v2:v2,v1,", "wardle.example.com:v1alpha1:v1alpha1,v1beta1,",
		"stable.example.com:v1:v1,v1beta1,", "metrics.k8s.io:v1beta1:v1beta1,"}
	if len(got) != len(want) {
		t.Fatalf("groups = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("group %d = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestMergedGroups_NoAggregator_LocalGroupsOnly(t *testing.T) {
	groups := discoveryServer(t, nil).mergedGroups()
	if len(groups) != 3 {
		t.Errorf("groups = %+v, want the three local ones", groups)
	}
}

func TestMergeAggregated_StaleRemote_MarkedAndOthersCurrent(t *testing.T) {
	flunders := &apidiscoveryv2.APIVersionDiscovery{Version: "v1alpha1", Resources: []apidiscoveryv2.APIResourceDiscovery{{Resource: "flunders"}}}
	agg := &fakeAggregator{prio: upstreamTable(), remote: []RemoteVersion{
		{Group: "wardle.example.com", Version: "v1alpha1", GroupPriority: 2000, VersionPriority: 200, Discovery: flunders},
		{Group: "broken.example.com", Version: "v1", GroupPriority: 3000, VersionPriority: 15, Stale: true},
	}}
	local := []apidiscoveryv2.APIGroupDiscovery{
		{ObjectMeta: metav1.ObjectMeta{Name: "autoscaling"}, Versions: []apidiscoveryv2.APIVersionDiscovery{{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}, {Version: "v2", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "apps"}, Versions: []apidiscoveryv2.APIVersionDiscovery{{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}}},
	}
	out := discoveryServer(t, agg).mergeAggregated(local, false)
	var names []string
	for _, g := range out {
		names = append(names, g.Name)
	}
	want := []string{"apps", "autoscaling", "broken.example.com", "wardle.example.com"}
	if len(names) != len(want) {
		t.Fatalf("groups = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("groups = %v, want %v", names, want)
		}
	}
	if out[1].Versions[0].Version != "v2" {
		t.Errorf("autoscaling versions = %+v, want v2 first", out[1].Versions)
	}
	if v := out[2].Versions[0]; v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale || len(v.Resources) != 0 {
		t.Errorf("broken = %+v, want Stale without resources", v)
	}
	if v := out[3].Versions[0]; v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent || len(v.Resources) != 1 {
		t.Errorf("wardle = %+v, want Current with its resources", v)
	}
	if core := discoveryServer(t, agg).mergeAggregated(local, true); len(core) != 2 {
		t.Errorf("/api discovery changed: %+v", core)
	}
}

func TestServeRemote_Paths_OnlyRemoteGroupVersionsRouted(t *testing.T) {
	agg := &fakeAggregator{remote: []RemoteVersion{{Group: "wardle.example.com", Version: "v1alpha1"}}}
	s := discoveryServer(t, agg)
	tests := []struct {
		path   string
		routed bool
	}{
		{"/apis/wardle.example.com/v1alpha1", true},
		{"/apis/wardle.example.com/v1alpha1/", true},
		{"/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/x/status", true},
		{"/apis/wardle.example.com", false}, // group discovery is served here
		{"/apis/wardle.example.com/v1beta1/flunders", false},
		{"/apis/apps/v1/deployments", false},
		{"/api/v1/pods", false},
		{"/apis", false},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		got := s.serveRemote(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if got != tt.routed || (got && rec.Code != http.StatusTeapot) {
			t.Errorf("%s: routed %v (code %d), want %v", tt.path, got, rec.Code, tt.routed)
		}
	}
}
