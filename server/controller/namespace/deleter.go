package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

const (
	// finalizerToken is the spec finalizer this controller owns: the
	// promise that the namespace's content is gone.
	finalizerToken = corev1.FinalizerKubernetes
	// waitEstimateSeconds is how long content that is already being
	// deleted (finalizers, a kubelet yet to confirm a pod) is assumed to
	// need. Upstream uses 15; a shorter guess releases namespaces sooner
	// and costs only a few extra list calls.
	waitEstimateSeconds = 8
	// conflictRetries bounds re-reading the namespace on write conflicts;
	// beyond it the workqueue's backoff takes over.
	conflictRetries = 5
)

// remainingError reports content that is going away by itself; the caller
// looks again after a delay derived from the estimate.
type remainingError struct {
	estimate int64 // seconds
}

func (e *remainingError) Error() string {
	return fmt.Sprintf("some content remains in the namespace, estimate %d seconds before it is removed", e.estimate)
}

type deleter struct {
	cfg Config
	log *slog.Logger
}

// sync makes one pass over a namespace: nothing unless it is being
// deleted and still carries our finalizer; otherwise delete its content,
// record the outcome in status conditions and, when it is empty, release
// the finalizer. It reads the namespace from the server rather than the
// informer, because other writers (and our own previous pass) change it
// during termination and a stale copy would only earn conflicts.
func (d *deleter) sync(ctx context.Context, name string) error {
	ns, err := d.cfg.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		if ns, err = d.update(ctx, ns, d.markTerminating); err != nil {
			return ignoreNotFound(err)
		}
	}
	if !slices.Contains(ns.Spec.Finalizers, finalizerToken) {
		return nil
	}
	res := d.deleteAllContent(ctx, ns.Name)
	conditions := res.conditions()
	updated, err := d.update(ctx, ns, func(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
		return d.writeConditions(ctx, ns, conditions)
	})
	if err != nil {
		// The conditions are a report; failing to write them must not stop
		// a namespace that is empty from being released.
		d.log.Warn("namespace status conditions", "namespace", name, "err", err)
	} else {
		ns = updated
	}
	if err := res.err(); err != nil {
		return err
	}
	if res.estimate > 0 {
		return &remainingError{estimate: res.estimate}
	}
	_, err = d.update(ctx, ns, d.finalize)
	return ignoreNotFound(err)
}

// update applies write to ns and, on a conflict, to a fresh copy, so that
// a concurrent writer does not cost a whole pass.
func (d *deleter) update(ctx context.Context, ns *corev1.Namespace, write func(context.Context, *corev1.Namespace) (*corev1.Namespace, error)) (*corev1.Namespace, error) {
	for attempt := 0; ; attempt++ {
		out, err := write(ctx, ns)
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return out, err
		}
		latest, err := d.cfg.Client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if latest.UID != ns.UID {
			// A namespace of the same name was made anew: the one we were
			// emptying is gone, and the next pass judges the new one.
			return nil, fmt.Errorf("namespace %s was recreated (uid changed)", ns.Name)
		}
		ns = latest
	}
}

func (d *deleter) markTerminating(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	if ns.Status.Phase == corev1.NamespaceTerminating {
		return ns, nil
	}
	ns = ns.DeepCopy()
	ns.Status.Phase = corev1.NamespaceTerminating
	return d.cfg.Client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
}

func (d *deleter) writeConditions(ctx context.Context, ns *corev1.Namespace, conditions []corev1.NamespaceCondition) (*corev1.Namespace, error) {
	ns = ns.DeepCopy()
	if !mergeConditions(&ns.Status, conditions, metav1.Now()) {
		return ns, nil
	}
	return d.cfg.Client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
}

// finalize removes our token from spec.finalizers, leaving the others for
// their owners; the server deletes the namespace once none remain.
func (d *deleter) finalize(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	if !slices.Contains(ns.Spec.Finalizers, finalizerToken) {
		return ns, nil
	}
	ns = ns.DeepCopy()
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == finalizerToken })
	return d.cfg.Client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// content is the outcome of one attempt to empty a namespace.
type content struct {
	discoveryErr error
	gvErr        error
	deleteErrs   []error
	remaining    map[schema.GroupVersionResource]int
	finalizers   map[string]int // finalizer -> objects held by it
	estimate     int64          // seconds until what remains should be gone
}

func (c *content) err() error {
	return errors.Join(c.discoveryErr, c.gvErr, errors.Join(c.deleteErrs...))
}

// resource is one namespaced resource found by discovery.
type resource struct {
	gvr   schema.GroupVersionResource
	verbs metav1.Verbs
}

func (r resource) can(verb string) bool { return slices.Contains(r.verbs, verb) }

// deleteAllContent deletes every kind of object in the namespace and
// reports what is left. Failures are collected, not returned early: every
// resource that can be emptied is, and a partial discovery still gives
// most of the list, as upstream does.
func (d *deleter) deleteAllContent(ctx context.Context, namespace string) *content {
	c := &content{remaining: map[schema.GroupVersionResource]int{}, finalizers: map[string]int{}}
	lists, err := discovery.ServerPreferredNamespacedResourcesWithContext(ctx, discovery.ToDiscoveryInterfaceWithContext(d.cfg.Discovery))
	if err != nil {
		c.discoveryErr = err
	}
	resources, err := deletable(lists)
	if err != nil {
		c.gvErr = err
	}
	// Pods go first, and nothing else goes until they are gone (upstream's
	// OrderedNamespaceDeletion): a pod still running must keep the
	// secrets, configmaps and service account it uses, and its policies.
	pods, rest := splitPods(resources)
	now := time.Now()
	for _, r := range pods {
		d.deleteAndAssess(ctx, c, r, namespace, now)
	}
	if len(c.remaining) > 0 {
		return c
	}
	for _, r := range rest {
		d.deleteAndAssess(ctx, c, r, namespace, now)
	}
	return c
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// splitPods separates core pods from the other resources.
func splitPods(resources []resource) (pods, rest []resource) {
	for _, r := range resources {
		if r.gvr == podsGVR {
			pods = append(pods, r)
		} else {
			rest = append(rest, r)
		}
	}
	return pods, rest
}

// deleteAndAssess empties one resource in the namespace and records in c
// what is left and why.
func (d *deleter) deleteAndAssess(ctx context.Context, c *content, r resource, namespace string, now time.Time) {
	left, err := d.deleteResource(ctx, r, namespace)
	if err != nil {
		c.deleteErrs = append(c.deleteErrs, err)
	}
	if len(left) == 0 {
		return
	}
	c.remaining[r.gvr] += len(left)
	estimate, waiting := assess(left, now, c.finalizers)
	c.estimate = max(c.estimate, estimate)
	if !waiting && err == nil {
		// Nothing is deleting these; something (a create racing the
		// delete) put them there after we looked. Retry, as an error.
		c.deleteErrs = append(c.deleteErrs, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", namespace, r.gvr))
	}
}

// deletable picks the resources that can be emptied: those with
// deletecollection, or with delete (list finds what to delete). It skips
// subresources, which are deleted with their parents.
func deletable(lists []*metav1.APIResourceList) ([]resource, error) {
	var out []resource
	var errs []error
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range l.APIResources {
			res := resource{gvr: gv.WithResource(r.Name), verbs: r.Verbs}
			if !r.Namespaced || strings.Contains(r.Name, "/") || !(res.can("deletecollection") || res.can("delete")) {
				continue
			}
			out = append(out, res)
		}
	}
	return out, errors.Join(errs...)
}

// deleteResource deletes all objects of one resource in the namespace and
// returns those still present afterwards.
func (d *deleter) deleteResource(ctx context.Context, r resource, namespace string) ([]metav1.PartialObjectMetadata, error) {
	client := d.cfg.Metadata.Resource(r.gvr).Namespace(namespace)
	// Background propagation: the garbage collector must not add the
	// orphan finalizer to objects deleted wholesale, or the namespace
	// would wait on it; dependents are in the namespace and go too.
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	collected := false
	if r.can("deletecollection") {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		if err != nil && !notSupported(err) {
			return nil, err
		}
		collected = err == nil
	}
	if !r.can("list") {
		// Nothing to enumerate with: neither one-by-one deletion nor a
		// check of what is left is possible.
		return nil, nil
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if notSupported(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if collected || !r.can("delete") || len(list.Items) == 0 {
		return list.Items, nil
	}
	for _, item := range list.Items {
		if err := client.Delete(ctx, item.Name, opts); err != nil && !notSupported(err) {
			return nil, err
		}
	}
	list, err = client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// notSupported covers a resource that discovery lists but that refuses
// the verb; upstream also counts NotFound, which some servers answer for a
// resource without top-level verbs.
func notSupported(err error) bool {
	return apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err)
}

// assess looks at objects that survived deletion, adds their finalizers to
// the tally, and estimates in seconds how long they should take to go.
// waiting is false when some object is not being deleted at all.
func assess(items []metav1.PartialObjectMetadata, now time.Time, finalizers map[string]int) (estimate int64, waiting bool) {
	waiting = true
	for _, item := range items {
		for _, f := range item.Finalizers {
			finalizers[f]++
		}
		switch dt := item.DeletionTimestamp; {
		case dt != nil && dt.After(now):
			// A gracefully terminating pod: the server set its
			// deletionTimestamp to when its grace period ends.
			estimate = max(estimate, int64(dt.Sub(now).Seconds())+1)
		case dt != nil || len(item.Finalizers) > 0:
			// Waiting on a finalizer's owner or a kubelet's confirmation.
			estimate = max(estimate, waitEstimateSeconds)
		default:
			waiting = false
		}
	}
	return estimate, waiting
}
