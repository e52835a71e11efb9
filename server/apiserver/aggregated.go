package apiserver

import (
	"net/http"
	"sort"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Aggregator is what the API server asks about the group-versions that
// extension API servers serve (upstream's kube-aggregator: APIServices
// backed by a Service), and about the order discovery lists groups in.
type Aggregator interface {
	// Proxy returns the handler of the requests under
	// /apis/<group>/<version> when an extension API server serves that
	// group-version, and false when it is served here (or by nobody). The
	// handler runs after authentication and authorization.
	Proxy(group, version string) (http.Handler, bool)
	// Remote lists the group-versions extension API servers serve.
	Remote() []RemoteVersion
	// Priority is the place of a group-version served here in discovery:
	// upstream's groupPriorityMinimum and versionPriority.
	Priority(group, version string) (groupPriority, versionPriority int32)
}

// RemoteVersion is one group-version of an extension API server.
type RemoteVersion struct {
	Group, Version                 string
	GroupPriority, VersionPriority int32
	// Discovery is the version's resources as its server last reported
	// them (nil: never fetched).
	Discovery *apidiscoveryv2.APIVersionDiscovery
	// Stale means the server is unavailable or its last discovery fetch
	// failed: aggregated discovery marks the version so, as upstream.
	Stale bool
}

type aggregatorBox struct{ a Aggregator }

// SetAggregator routes the group-versions of extension API servers through
// a and merges them into discovery. It is a setter, not a Config field,
// because the aggregator reaches the API through this server.
func (s *Server) SetAggregator(a Aggregator) { s.agg.Store(&aggregatorBox{a}) }

func (s *Server) aggregator() Aggregator {
	if b := s.agg.Load(); b != nil {
		return b.a
	}
	return nil
}

// serveRemote hands a request under /apis/<group>/<version> to the
// extension API server of that group-version; it reports whether it did.
func (s *Server) serveRemote(w http.ResponseWriter, r *http.Request) bool {
	a := s.aggregator()
	parts := splitPath(r.URL.Path)
	if a == nil || len(parts) < 3 || parts[0] != "apis" {
		return false
	}
	h, ok := a.Proxy(parts[1], parts[2])
	if !ok {
		return false
	}
	h.ServeHTTP(w, r)
	return true
}

// discoveryVersion is one version of a group with its place in discovery.
type discoveryVersion struct {
	version                        string
	groupPriority, versionPriority int32
}

// mergedGroups are the groups of /apis and /apis/<group>: those served
// here and those of extension API servers, in upstream's order.
func (s *Server) mergedGroups() []metav1.APIGroup {
	a := s.aggregator()
	local := s.groups()
	if a == nil {
		return local
	}
	byGroup := map[string][]discoveryVersion{}
	for _, g := range local {
		for _, v := range g.Versions {
			gp, vp := a.Priority(g.Name, v.Version)
			byGroup[g.Name] = append(byGroup[g.Name], discoveryVersion{v.Version, gp, vp})
		}
	}
	for _, rv := range a.Remote() {
		if rv.Group == "" {
			continue
		}
		byGroup[rv.Group] = putVersion(byGroup[rv.Group], discoveryVersion{rv.Version, rv.GroupPriority, rv.VersionPriority})
	}
	out := make([]metav1.APIGroup, 0, len(byGroup))
	for _, name := range orderGroups(byGroup) {
		versions := byGroup[name]
		g := metav1.APIGroup{Name: name}
		for _, v := range versions {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v.version, Version: v.version})
		}
		g.PreferredVersion = g.Versions[0]
		out = append(out, g)
	}
	return out
}

// putVersion adds v to a group's versions, replacing one of the same
// name: an extension API server's APIService takes the group-version over.
func putVersion(vs []discoveryVersion, v discoveryVersion) []discoveryVersion {
	for i := range vs {
		if vs[i].version == v.version {
			vs[i] = v
			return vs
		}
	}
	return append(vs, v)
}

// orderGroups sorts each group's versions and returns the group names in
// upstream's discovery order: versions by versionPriority, then the
// kube-aware version order (v2 > v1 > v1beta1); groups by the highest
// groupPriorityMinimum of their versions, then by name.
func orderGroups(byGroup map[string][]discoveryVersion) []string {
	names := make([]string, 0, len(byGroup))
	top := map[string]int32{}
	for name, vs := range byGroup {
		sortVersions(vs)
		names = append(names, name)
		for _, v := range vs {
			top[name] = max(top[name], v.groupPriority)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if top[names[i]] != top[names[j]] {
			return top[names[i]] > top[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}

func sortVersions(vs []discoveryVersion) {
	sort.SliceStable(vs, func(i, j int) bool {
		if vs[i].versionPriority != vs[j].versionPriority {
			return vs[i].versionPriority > vs[j].versionPriority
		}
		return version.CompareKubeAwareVersionStrings(vs[i].version, vs[j].version) > 0
	})
}

// mergeAggregated adds the versions of extension API servers to the
// aggregated discovery of /apis and orders it as upstream does. A remote
// version the aggregator could not (or no longer) read is listed Stale,
// with the resources it last reported if any: only that group-version
// fails for clients, the rest of the document is unaffected.
func (s *Server) mergeAggregated(items []apidiscoveryv2.APIGroupDiscovery, core bool) []apidiscoveryv2.APIGroupDiscovery {
	a := s.aggregator()
	if a == nil || core {
		return items
	}
	groups := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	places := map[string][]discoveryVersion{}
	for i := range items {
		g := &items[i]
		groups[g.Name] = g
		for _, v := range g.Versions {
			gp, vp := a.Priority(g.Name, v.Version)
			places[g.Name] = append(places[g.Name], discoveryVersion{v.Version, gp, vp})
		}
	}
	for _, rv := range a.Remote() {
		if rv.Group == "" {
			continue
		}
		g := groups[rv.Group]
		if g == nil {
			g = &apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: rv.Group}}
			groups[rv.Group] = g
		}
		entry := apidiscoveryv2.APIVersionDiscovery{}
		if rv.Discovery != nil {
			entry = *rv.Discovery.DeepCopy()
		}
		entry.Version, entry.Freshness = rv.Version, apidiscoveryv2.DiscoveryFreshnessCurrent
		if rv.Stale {
			entry.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
		}
		*versionEntry(g, rv.Version) = entry
		places[rv.Group] = putVersion(places[rv.Group], discoveryVersion{rv.Version, rv.GroupPriority, rv.VersionPriority})
	}
	out := make([]apidiscoveryv2.APIGroupDiscovery, 0, len(groups))
	for _, name := range orderGroups(places) {
		g := groups[name]
		rank := map[string]int{}
		for i, v := range places[name] {
			rank[v.version] = i
		}
		sort.SliceStable(g.Versions, func(i, j int) bool { return rank[g.Versions[i].Version] < rank[g.Versions[j].Version] })
		out = append(out, *g)
	}
	return out
}
