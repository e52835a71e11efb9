package apiserver

import (
	"encoding/json"
	"mime"
	"net/http"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/registry"
)

// subresource is one entry of discovery below a resource.
type subresource struct {
	name  string
	kind  schema.GroupVersionKind // zero: the parent's kind
	verbs []string
}

// subresources are served per resource; the handlers live in subresource.go.
func subresources(res *registry.Resource) []subresource {
	var out []subresource
	if res.Status {
		out = append(out, subresource{name: "status", verbs: []string{"get", "patch", "update"}})
	}
	if res.Scale {
		out = append(out, subresource{name: "scale", kind: schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, verbs: []string{"get", "patch", "update"}})
	}
	switch {
	case res.Group == "" && res.Name == "pods":
		out = append(out,
			subresource{name: "binding", kind: schema.GroupVersionKind{Version: "v1", Kind: "Binding"}, verbs: []string{"create"}},
			subresource{name: "ephemeralcontainers", verbs: []string{"get", "patch", "update"}},
			subresource{name: "resize", verbs: []string{"get", "patch", "update"}},
			subresource{name: "eviction", kind: schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, verbs: []string{"create"}},
			subresource{name: "log", verbs: []string{"get"}},
			subresource{name: "exec", kind: schema.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}, verbs: []string{"create", "get"}},
			subresource{name: "attach", kind: schema.GroupVersionKind{Version: "v1", Kind: "PodAttachOptions"}, verbs: []string{"create", "get"}},
			subresource{name: "portforward", kind: schema.GroupVersionKind{Version: "v1", Kind: "PodPortForwardOptions"}, verbs: []string{"create", "get"}},
			proxySubresource("PodProxyOptions"))
	case res.Group == "" && res.Name == "services":
		out = append(out, proxySubresource("ServiceProxyOptions"))
	case res.Group == "" && res.Name == "nodes":
		out = append(out, proxySubresource("NodeProxyOptions"))
	case res.Group == "" && res.Name == "serviceaccounts":
		out = append(out, subresource{name: "token", kind: schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}, verbs: []string{"create"}})
	case res.Group == "" && res.Name == "namespaces":
		out = append(out, subresource{name: "finalize", verbs: []string{"update"}})
	case res.Group == "certificates.k8s.io" && res.Name == "certificatesigningrequests":
		out = append(out, subresource{name: "approval", verbs: []string{"get", "patch", "update"}})
	}
	return out
}

// proxySubresource is pods/proxy, services/proxy or nodes/proxy
// (proxy_resource.go), with upstream's verbs.
func proxySubresource(optionsKind string) subresource {
	return subresource{name: "proxy", kind: schema.GroupVersionKind{Version: "v1", Kind: optionsKind}, verbs: []string{"create", "delete", "get", "patch", "update"}}
}

func apiResource(res *registry.Resource) metav1.APIResource {
	return metav1.APIResource{
		Name: res.Name, SingularName: res.Singular, Namespaced: res.Namespaced, Kind: res.Kind,
		Verbs: res.Verbs, ShortNames: res.ShortNames, Categories: res.Categories,
	}
}

// serveResourceList serves /api/v1 and /apis/<group>/<version>.
func (s *Server) serveResourceList(w http.ResponseWriter, r *http.Request, group, version string) {
	list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: schema.GroupVersion{Group: group, Version: version}.String()}
	for _, res := range s.reg.All() {
		if res.Group != group || res.Version != version {
			continue
		}
		list.APIResources = append(list.APIResources, apiResource(res))
		for _, sub := range subresources(res) {
			e := metav1.APIResource{Name: res.Name + "/" + sub.name, Namespaced: res.Namespaced, Kind: res.Kind, Verbs: sub.verbs}
			if sub.kind.Kind != "" {
				e.Group, e.Version, e.Kind = sub.kind.Group, sub.kind.Version, sub.kind.Kind
			}
			list.APIResources = append(list.APIResources, e)
		}
	}
	if len(list.APIResources) == 0 {
		writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	writeJSON(w, r, http.StatusOK, list)
}

// groups returns the served API groups (core excluded), sorted with the
// preferred version first in each.
func (s *Server) groups() []metav1.APIGroup {
	byGroup := map[string]map[string]bool{}
	for _, res := range s.reg.All() {
		if res.Group == "" {
			continue
		}
		if byGroup[res.Group] == nil {
			byGroup[res.Group] = map[string]bool{}
		}
		byGroup[res.Group][res.Version] = true
	}
	names := make([]string, 0, len(byGroup))
	for g := range byGroup {
		names = append(names, g)
	}
	sort.Strings(names)
	out := make([]metav1.APIGroup, 0, len(names))
	for _, g := range names {
		preferred, _ := s.reg.PreferredVersion(g)
		group := metav1.APIGroup{Name: g}
		pv := metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + preferred, Version: preferred}
		group.PreferredVersion = pv
		group.Versions = append(group.Versions, pv)
		for v := range byGroup[g] {
			if v != preferred {
				group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
			}
		}
		out = append(out, group)
	}
	return out
}

func (s *Server) serveAPIGroup(w http.ResponseWriter, r *http.Request, name string) {
	for _, g := range s.mergedGroups() { // aggregated.go
		if g.Name == name {
			g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			writeJSON(w, r, http.StatusOK, g)
			return
		}
	}
	writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, ""))
}

func (s *Server) serveAPIVersions(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		s.serveAggregated(w, r, true)
		return
	}
	writeJSON(w, r, http.StatusOK, metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}},
	})
}

func (s *Server) serveAPIGroups(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		s.serveAggregated(w, r, false)
		return
	}
	writeJSON(w, r, http.StatusOK, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: s.mergedGroups()})
}

const aggregatedType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// wantsAggregated reports whether the client takes aggregated discovery
// (apidiscovery.k8s.io/v2), which answers /api or /apis in one request
// instead of one per group-version.
func wantsAggregated(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && mt == "application/json" && params["g"] == "apidiscovery.k8s.io" &&
			params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList" {
			return true
		}
	}
	return false
}

func (s *Server) serveAggregated(w http.ResponseWriter, r *http.Request, core bool) {
	list := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	groups := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	var order []string
	for _, res := range s.reg.All() {
		if (res.Group == "") != core {
			continue
		}
		g := groups[res.Group]
		if g == nil {
			g = &apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: res.Group}}
			groups[res.Group] = g
			order = append(order, res.Group)
		}
		versionEntry(g, res.Version).Resources = append(versionEntry(g, res.Version).Resources, discoveryResource(res))
	}
	for _, name := range order {
		g := groups[name]
		preferred, _ := s.reg.PreferredVersion(name)
		sort.SliceStable(g.Versions, func(i, j int) bool { return g.Versions[i].Version == preferred && g.Versions[j].Version != preferred })
		list.Items = append(list.Items, *g)
	}
	list.Items = s.mergeAggregated(list.Items, core) // aggregated.go
	b, err := json.Marshal(list)
	if err != nil {
		writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", aggregatedType)
	w.Header().Set("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func versionEntry(g *apidiscoveryv2.APIGroupDiscovery, version string) *apidiscoveryv2.APIVersionDiscovery {
	for i := range g.Versions {
		if g.Versions[i].Version == version {
			return &g.Versions[i]
		}
	}
	g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
	return &g.Versions[len(g.Versions)-1]
}

func discoveryResource(res *registry.Resource) apidiscoveryv2.APIResourceDiscovery {
	scope := apidiscoveryv2.ScopeCluster
	if res.Namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	d := apidiscoveryv2.APIResourceDiscovery{
		Resource: res.Name, SingularResource: res.Singular, Scope: scope, Verbs: res.Verbs,
		ShortNames: res.ShortNames, Categories: res.Categories,
		ResponseKind: &metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind},
	}
	for _, sub := range subresources(res) {
		kind := sub.kind
		if kind.Kind == "" {
			kind = res.GVK()
		}
		d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: sub.name, Verbs: sub.verbs,
			ResponseKind: &metav1.GroupVersionKind{Group: kind.Group, Version: kind.Version, Kind: kind.Kind},
		})
	}
	return d
}

// SubresourceNames are the subresources served for res.
func SubresourceNames(res *registry.Resource) []string {
	var out []string
	for _, s := range subresources(res) {
		out = append(out, s.name)
	}
	return out
}
