package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// The discovery of extension API servers, fetched, cached and refreshed
// as upstream's discovery manager does: aggregated discovery
// (apidiscovery.k8s.io/v2) from /apis when the server has it, else the
// legacy /apis/<group>/<version> converted. A failed fetch keeps the last
// good answer and marks it stale.

const (
	aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
	// maxDiscoveryBytes bounds what a backend's discovery may cost us.
	maxDiscoveryBytes = 16 << 20
)

type discoveryEntry struct {
	version *apidiscoveryv2.APIVersionDiscovery
	err     error
}

// discoveryCache holds the last discovery of each remote APIService.
type discoveryCache struct {
	mu      sync.RWMutex
	entries map[string]discoveryEntry
}

func newDiscoveryCache() *discoveryCache {
	return &discoveryCache{entries: map[string]discoveryEntry{}}
}

func (c *discoveryCache) get(name string) (discoveryEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[name]
	return e, ok
}

// put records a fetch: a failure keeps the resources last fetched.
func (c *discoveryCache) put(name string, v *apidiscoveryv2.APIVersionDiscovery, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		e := c.entries[name]
		e.err = err
		c.entries[name] = e
		return
	}
	c.entries[name] = discoveryEntry{version: v}
}

func (c *discoveryCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, name)
}

// fetcher reads the discovery of one APIService's group-version.
type fetcher struct {
	resolver   resolver
	transports *transports
}

func (f *fetcher) fetch(ctx context.Context, s *apiregistrationv1.APIService) (*apidiscoveryv2.APIVersionDiscovery, error) {
	rt, err := f.transports.forAPIService(s)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: rt, Timeout: discoveryCheckTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	host, err := f.resolver.resolve(s.Spec.Service.Namespace, s.Spec.Service.Name, servicePort(s))
	if err != nil {
		return nil, err
	}
	body, ctype, err := get(ctx, client, &url.URL{Scheme: "https", Host: host, Path: "/apis"}, aggregatedAccept)
	if err == nil && isAggregated(ctype) {
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("decode the aggregated discovery of %s: %w", s.Name, err)
		}
		for _, g := range list.Items {
			if g.Name != s.Spec.Group {
				continue
			}
			for i := range g.Versions {
				if g.Versions[i].Version == s.Spec.Version {
					return &g.Versions[i], nil
				}
			}
		}
		// The server answered but does not serve the group-version: it
		// exists, with no resources, as upstream lists it.
		return &apidiscoveryv2.APIVersionDiscovery{Version: s.Spec.Version}, nil
	}
	// No aggregated discovery: the legacy document of the group-version.
	body, _, err = get(ctx, client, &url.URL{Scheme: "https", Host: host, Path: "/apis/" + s.Spec.Group + "/" + s.Spec.Version}, "application/json")
	if err != nil {
		return nil, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode the discovery of %s: %w", s.Name, err)
	}
	return legacyToAggregated(s.Spec.Group, s.Spec.Version, list.APIResources), nil
}

func get(ctx context.Context, client *http.Client, u *url.URL, accept string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", accept)
	setIdentity(req, aggregatorUser)
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoveryBytes))
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %v: %d %s", u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, resp.Header.Get("Content-Type"), nil
}

func isAggregated(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json" && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList"
}

// legacyToAggregated is upstream's ConvertGroupVersionIntoToDiscovery:
// resources become entries, "<resource>/<sub>" ones their subresources.
func legacyToAggregated(group, version string, resources []metav1.APIResource) *apidiscoveryv2.APIVersionDiscovery {
	out := &apidiscoveryv2.APIVersionDiscovery{Version: version}
	kindOf := func(r metav1.APIResource) *metav1.GroupVersionKind {
		gvk := &metav1.GroupVersionKind{Group: group, Version: version, Kind: r.Kind}
		if r.Group != "" || r.Version != "" {
			gvk.Group, gvk.Version = r.Group, r.Version
		}
		return gvk
	}
	index := map[string]int{}
	for _, r := range resources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[r.Name] = len(out.Resources)
		out.Resources = append(out.Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, SingularResource: r.SingularName, Scope: scope, ResponseKind: kindOf(r),
			Verbs: r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
		})
	}
	for _, r := range resources {
		parent, sub, ok := strings.Cut(r.Name, "/")
		if !ok {
			continue
		}
		i, found := index[parent]
		if !found {
			// A subresource without its resource: upstream lists the
			// parent anyway, scoped as the subresource says.
			scope := apidiscoveryv2.ScopeCluster
			if r.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			i = len(out.Resources)
			index[parent] = i
			out.Resources = append(out.Resources, apidiscoveryv2.APIResourceDiscovery{Resource: parent, Scope: scope})
		}
		out.Resources[i].Subresources = append(out.Resources[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: sub, ResponseKind: kindOf(r), Verbs: r.Verbs,
		})
	}
	return out
}

// errUnavailable marks the discovery of an APIService that is not
// Available: it is not fetched, and what was fetched before goes stale.
var errUnavailable = errors.New("the APIService is not available")

// discoveryRefresh is how often the discovery of an available APIService
// is read again (upstream's discoveryRefreshInterval).
const discoveryRefresh = time.Minute
