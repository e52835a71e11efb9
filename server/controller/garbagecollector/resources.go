package garbagecollector

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// resource is one resource from discovery.
type resource struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
	// collectable: listable, watchable and deletable, so its objects can
	// be followed by an informer and collected.
	collectable bool
}

// refOf names an object of this resource.
func (r resource) refOf(m metav1.Object) objectRef {
	return objectRef{APIVersion: r.gvk.GroupVersion().String(), Kind: r.gvk.Kind, Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}
}

// errUnknownKind: discovery does not serve the kind an object or owner
// reference names (yet: a CRD may be on its way), so the work is retried.
var errUnknownKind = errors.New("kind not served by the API server")

// mapping answers which resource serves a kind, for every served version:
// owner references may name any version, not just the preferred one.
type mapping struct {
	byGVK map[schema.GroupVersionKind]resource
	// byGK is the preferred version's resource of each kind, the fallback
	// for a reference to a version no longer served: the object is the same
	// in every version of its group.
	byGK map[schema.GroupKind]resource
}

// lookup finds the resource for a reference's apiVersion and kind.
func (m *mapping) lookup(apiVersion, kind string) (resource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return resource{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	if m != nil {
		if r, ok := m.byGVK[gv.WithKind(kind)]; ok {
			return r, nil
		}
		if r, ok := m.byGK[schema.GroupKind{Group: gv.Group, Kind: kind}]; ok {
			return r, nil
		}
	}
	return resource{}, fmt.Errorf("%s %s: %w", apiVersion, kind, errUnknownKind)
}

// ignored are resources the collector never follows: events are many,
// short-lived and nobody's owner (upstream ignores them too).
var ignored = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// discover reads the served resources. It returns the mapping, the
// resources to watch (one version of each collectable resource, the
// preferred where it has it), and whether discovery was complete: after a
// partial failure, monitors of the missing groups must be kept.
func discover(d discovery.DiscoveryInterface) (*mapping, []resource, bool, error) {
	groups, lists, err := d.ServerGroupsAndResources()
	complete := err == nil
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, nil, false, err
	}
	m, watch := buildMapping(groups, lists)
	return m, watch, complete, nil
}

// buildMapping is discover without the API call.
func buildMapping(groups []*metav1.APIGroup, lists []*metav1.APIResourceList) (*mapping, []resource) {
	preferred := map[string]string{} // group -> preferred version
	order := map[string]int{}        // groupVersion -> rank in its group
	for _, g := range groups {
		if g == nil {
			continue
		}
		preferred[g.Name] = g.PreferredVersion.Version
		for i, v := range g.Versions {
			order[v.GroupVersion] = i
		}
	}
	// Preferred versions first, then the others in the server's order, so
	// the first version seen of each resource is the one to watch.
	lists = slices.Clone(lists)
	slices.SortStableFunc(lists, func(a, b *metav1.APIResourceList) int { return rank(a, preferred, order) - rank(b, preferred, order) })
	m := &mapping{byGVK: map[schema.GroupVersionKind]resource{}, byGK: map[schema.GroupKind]resource{}}
	var watch []resource
	seen := map[schema.GroupResource]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") { // subresources are not objects
				continue
			}
			res := resource{gvr: gv.WithResource(r.Name), gvk: gv.WithKind(r.Kind), namespaced: r.Namespaced, collectable: collectable(r.Verbs)}
			if _, ok := m.byGVK[res.gvk]; !ok {
				m.byGVK[res.gvk] = res
			}
			if _, ok := m.byGK[res.gvk.GroupKind()]; !ok {
				m.byGK[res.gvk.GroupKind()] = res
			}
			gr := res.gvr.GroupResource()
			if !seen[gr] && res.collectable && !ignored[gr] {
				watch = append(watch, res)
			}
			seen[gr] = true
		}
	}
	return m, watch
}

func rank(l *metav1.APIResourceList, preferred map[string]string, order map[string]int) int {
	gv, _ := schema.ParseGroupVersion(l.GroupVersion)
	if preferred[gv.Group] == gv.Version {
		return -1
	}
	return order[l.GroupVersion]
}

// collectable: the collector lists and watches objects to see them and
// deletes them to collect them; anything else (reviews, token requests)
// holds no objects it could manage.
func collectable(verbs metav1.Verbs) bool {
	return slices.Contains(verbs, "list") && slices.Contains(verbs, "watch") && slices.Contains(verbs, "delete")
}
