package resourcequota

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"skiff/server/quota"
)

var (
	podsGR     = schema.GroupResource{Resource: "pods"}
	servicesGR = schema.GroupResource{Resource: "services"}
	pvcsGR     = schema.GroupResource{Resource: "persistentvolumeclaims"}
	quotasGR   = schema.GroupResource{Resource: "resourcequotas"}
)

// typed are the group-resources followed by the shared typed informers:
// their usage is more than a count, so updates matter too (and quotas are
// the controller's own objects). Every other counted resource gets a
// metadata monitor of its own, only while some quota counts it.
var typed = map[schema.GroupResource]bool{podsGR: true, servicesGR: true, pvcsGR: true, quotasGR: true}

// legacyCounts are upstream's old object-count names, which count core
// resources without the count/ prefix.
var legacyCounts = map[corev1.ResourceName]schema.GroupResource{
	corev1.ResourceConfigMaps:             {Resource: "configmaps"},
	corev1.ResourceSecrets:                {Resource: "secrets"},
	corev1.ResourceReplicationControllers: {Resource: "replicationcontrollers"},
	corev1.ResourceQuotas:                 quotasGR,
}

// countedResource is the group-resource an object-count name counts:
// count/<resource>[.<group>] or a legacy name.
func countedResource(name corev1.ResourceName) (schema.GroupResource, bool) {
	if gr, ok := legacyCounts[name]; ok {
		return gr, true
	}
	rest, ok := strings.CutPrefix(string(name), "count/")
	if !ok || rest == "" {
		return schema.GroupResource{}, false
	}
	// Resource names have no dots: the first one ends the resource.
	res, group, _ := strings.Cut(rest, ".")
	return schema.GroupResource{Group: group, Resource: res}, true
}

// resources lists the objects a quota measures, live from the API server:
// the quota admission check charges creates to status.used as they happen,
// and a list that lagged behind one (as an informer cache may) would hand
// the charge back too early. Objects only counted are listed as metadata;
// discovery tells which version of a group-resource to ask for.
type resources struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface

	mu      sync.Mutex
	byGR    map[schema.GroupResource]schema.GroupVersionResource
	fetched time.Time
}

// lookup returns the version to list gr at; ok is false when the server
// does not serve gr as a quotable namespaced resource. A resource not
// known makes discovery be read again, unless that happened after since
// (the start of the sync asking): a CRD created a moment ago is found,
// and the syncs of one burst share a single discovery walk.
func (r *resources) lookup(gr schema.GroupResource, since time.Time) (gvr schema.GroupVersionResource, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gvr, ok := r.byGR[gr]; ok {
		return gvr, true, nil
	}
	if r.fetched.After(since) {
		return schema.GroupVersionResource{}, false, nil
	}
	if err := r.refreshLocked(); err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	gvr, ok = r.byGR[gr]
	return gvr, ok, nil
}

// refresh reads discovery again.
func (r *resources) refresh() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refreshLocked()
}

// served reports whether the last discovery read found gr.
func (r *resources) served(gr schema.GroupResource) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.byGR[gr]
	return ok
}

// forget drops gr after the server said it no longer serves it.
func (r *resources) forget(gr schema.GroupResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byGR, gr)
}

// refreshLocked reads the preferred version of every namespaced resource
// that can be created, listed, watched and deleted: upstream's quotable
// resources. After a partial failure the groups that failed keep what was
// known of them.
func (r *resources) refreshLocked() error {
	// Stamped with the start: lookup trusts a walk begun after a sync did.
	start := time.Now()
	lists, err := discovery.ServerPreferredNamespacedResources(r.discovery)
	partial := err != nil
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovery: %w", err)
	}
	m := map[schema.GroupResource]schema.GroupVersionResource{}
	if partial {
		for gr, gvr := range r.byGR {
			m[gr] = gvr
		}
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || !quotable(res.Verbs) {
				continue
			}
			m[gv.WithResource(res.Name).GroupResource()] = gv.WithResource(res.Name)
		}
	}
	r.byGR, r.fetched = m, start
	return nil
}

func quotable(verbs metav1.Verbs) bool {
	for _, v := range []string{"create", "list", "watch", "delete"} {
		if !slices.Contains(verbs, v) {
			return false
		}
	}
	return true
}

// lister is the quota.ListFunc of a sync that started at since.
func (r *resources) lister(since time.Time) quota.ListFunc {
	return func(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error) {
		return r.list(ctx, gr, namespace, since)
	}
}

func (r *resources) list(ctx context.Context, gr schema.GroupResource, namespace string, since time.Time) ([]runtime.Object, error) {
	opts := metav1.ListOptions{}
	switch gr {
	case podsGR:
		l, err := r.client.CoreV1().Pods(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return objects(l.Items), nil
	case servicesGR:
		l, err := r.client.CoreV1().Services(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return objects(l.Items), nil
	case pvcsGR:
		l, err := r.client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return objects(l.Items), nil
	}
	gvr, ok, err := r.lookup(gr, since)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w", gr, quota.ErrNotServed)
	}
	l, err := r.metadata.Resource(gvr).Namespace(namespace).List(ctx, opts)
	if apierrors.IsNotFound(err) {
		// The resource went away (its CRD was deleted) since discovery.
		r.forget(gr)
		return nil, fmt.Errorf("%s: %w", gr, quota.ErrNotServed)
	}
	if err != nil {
		return nil, err
	}
	return objects(l.Items), nil
}

// objects turns list items into the pointers the evaluators take.
func objects[T any, P interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}
