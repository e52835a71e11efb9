// Package storageversionmigration runs StorageVersionMigrations
// (storagemigration.k8s.io/v1) as upstream's migration controllers do,
// folded into one: of the migrations of one resource, the oldest that has
// not finished is marked Running; it records the resource's current list
// resourceVersion, then rewrites every object no newer than that with a
// no-op patch guarded by the object's resourceVersion (so each object is
// written again in the server's current storage encoding), and ends
// Succeeded, or Failed when the resource is not served or cannot be
// migrated. A finished migration's Running condition turns False.
package storageversionmigration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"skiff/server/controller/worker"
)

// Upstream's reasons and grace period.
const (
	ReasonRunning   = "MigrationRunning"
	ReasonSucceeded = "StorageVersionMigrationSucceeded"
	ReasonFailed    = "StorageVersionMigrationFailed"
	ReasonCompleted = "MigrationCompleted"
	// DefaultDiscoveryGrace is how long a migration waits for its resource
	// to appear in discovery (a CRD just created) before it fails.
	DefaultDiscoveryGrace = time.Minute
)

// ControllerName is the field manager of the controller's patches.
const ControllerName = "storage-version-migrator-controller"

// verbs a resource must serve to be migrated.
var migrationVerbs = []string{"update", "patch", "list"}

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Dynamic lists and patches the objects of any resource.
	Dynamic dynamic.Interface
	// Discovery maps a migration's group and resource to what is served.
	Discovery discovery.DiscoveryInterface
	// Informers is shared; the StorageVersionMigration informer is taken
	// from it.
	Informers informers.SharedInformerFactory
	Logger    *slog.Logger
	// DiscoveryGrace overrides DefaultDiscoveryGrace (tests).
	DiscoveryGrace time.Duration
	// Clock is the time source (real by default).
	Clock clock.WithTicker
}

type controller struct {
	cfg   Config
	log   *slog.Logger
	clock clock.WithTicker
	svms  svmlisters.StorageVersionMigrationLister
	queue *worker.Queue
}

// Run migrates until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Dynamic == nil || cfg.Discovery == nil || cfg.Informers == nil {
		return errors.New("storage version migration controller: Client, Dynamic, Discovery and Informers are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.DiscoveryGrace == 0 {
		cfg.DiscoveryGrace = DefaultDiscoveryGrace
	}
	c := &controller{cfg: cfg, log: cfg.Logger, clock: cfg.Clock,
		queue: worker.New(worker.Config{Name: "storage_version_migrator", Clock: cfg.Clock, Log: cfg.Logger,
			Message: "syncing storage version migration failed", Noun: "migration", Quiet: apierrors.IsConflict})}
	defer c.queue.ShutDown()
	inf := cfg.Informers.Storagemigration().V1().StorageVersionMigrations()
	c.svms = inf.Lister()
	synced, unsubscribe, err := worker.Subscribe(worker.Subscription{
		Informer: inf.Informer(),
		// A change to one migration may let the next of its resource run.
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.enqueueResource, UpdateFunc: func(_, n any) { c.enqueueResource(n) }, DeleteFunc: c.enqueueResource},
	})
	if err != nil {
		return fmt.Errorf("storage version migration informer: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.queue.Run(ctx, 1, c.sync)
	return nil
}

// enqueueResource queues every migration of the changed one's resource.
func (c *controller) enqueueResource(obj any) {
	svm, ok := worker.Unwrap[*svmv1.StorageVersionMigration](obj)
	if !ok {
		return
	}
	all, _ := c.svms.List(labels.Everything())
	for _, o := range all {
		if o.Spec.Resource == svm.Spec.Resource {
			c.queue.Add(o.Name)
		}
	}
	c.queue.Add(svm.Name)
}

func isTrue(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(t))
}

func terminal(svm *svmv1.StorageVersionMigration) bool {
	return isTrue(svm, svmv1.MigrationSucceeded) || isTrue(svm, svmv1.MigrationFailed)
}

func (c *controller) sync(ctx context.Context, name string) error {
	cached, err := c.svms.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	svm := cached.DeepCopy()
	switch {
	case terminal(svm):
		if !isTrue(svm, svmv1.MigrationRunning) {
			return nil
		}
		return c.setConditions(ctx, svm, c.condition(svmv1.MigrationRunning, metav1.ConditionFalse, ReasonCompleted, "Migration completed"))
	case !isTrue(svm, svmv1.MigrationRunning):
		if next, err := c.nextToRun(svm.Spec.Resource); err != nil || next != svm.Name {
			return err
		}
		return c.setConditions(ctx, svm, c.condition(svmv1.MigrationRunning, metav1.ConditionTrue, ReasonRunning, runningMessage(0, 0)))
	case svm.Status.ResourceVersion == "":
		return c.recordResourceVersion(ctx, svm)
	}
	return c.migrate(ctx, svm)
}

// nextToRun is the migration of gr that may run: none while one runs,
// else the oldest unfinished one (by creation, then name).
func (c *controller) nextToRun(gr metav1.GroupResource) (string, error) {
	all, err := c.svms.List(labels.Everything())
	if err != nil {
		return "", err
	}
	var next *svmv1.StorageVersionMigration
	for _, o := range all {
		if o.Spec.Resource != gr || terminal(o) {
			continue
		}
		if isTrue(o, svmv1.MigrationRunning) {
			return "", nil
		}
		if next == nil || o.CreationTimestamp.Before(&next.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&next.CreationTimestamp) && o.Name < next.Name) {
			next = o
		}
	}
	if next == nil {
		return "", nil
	}
	return next.Name, nil
}

// resolve finds the served version of gr, its kind and scope. ok is false
// when discovery does not serve it.
func (c *controller) resolve(gr metav1.GroupResource) (gvr schema.GroupVersionResource, res metav1.APIResource, ok bool, err error) {
	groups, err := c.cfg.Discovery.ServerGroups()
	if err != nil {
		return gvr, res, false, fmt.Errorf("discovery: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name != gr.Group {
			continue
		}
		gv := g.PreferredVersion.GroupVersion
		list, err := c.cfg.Discovery.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return gvr, res, false, fmt.Errorf("discovery of %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Name == gr.Resource {
				return schema.GroupVersionResource{Group: gr.Group, Version: g.PreferredVersion.Version, Resource: r.Name}, r, true, nil
			}
		}
	}
	return gvr, res, false, nil
}

// recordResourceVersion marks where the migration ends: the resource's
// list resourceVersion now. A resource not served fails the migration once
// the discovery grace has passed.
func (c *controller) recordResourceVersion(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	gvr, res, ok, err := c.resolve(svm.Spec.Resource)
	if err != nil {
		return err
	}
	if !ok {
		// A CRD created a moment ago may not be in discovery yet.
		if wait := svm.CreationTimestamp.Add(c.cfg.DiscoveryGrace).Sub(c.clock.Now()); wait > 0 {
			c.queue.AddAfter(svm.Name, wait)
			return nil
		}
		return c.fail(ctx, svm, "resource does not exist in discovery")
	}
	for _, v := range migrationVerbs {
		if !slices.Contains(res.Verbs, v) {
			return c.fail(ctx, svm, fmt.Sprintf("resource %q does not support discovery operations: %v", gvr.String(), migrationVerbs))
		}
	}
	// The list's resourceVersion is the point the migration covers: every
	// object written before it is rewritten.
	list, err := c.cfg.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("latest resourceVersion of %s: %w", gvr, err)
	}
	svm.Status.ResourceVersion = list.GetResourceVersion()
	_, err = c.cfg.Client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

func (c *controller) migrate(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	gvr, res, ok, err := c.resolve(svm.Spec.Resource)
	if err != nil {
		return err
	}
	if !ok {
		return c.fail(ctx, svm, "unable to obtain GVR from discovery")
	}
	upTo, err := strconv.ParseUint(svm.Status.ResourceVersion, 10, 64)
	if err != nil {
		return c.fail(ctx, svm, fmt.Sprintf("invalid status.resourceVersion %q: %v", svm.Status.ResourceVersion, err))
	}
	var items []objectRef
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, err := c.cfg.Dynamic.Resource(gvr).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list %s: %w", gvr, err)
		}
		for _, o := range page.Items {
			items = append(items, objectRef{namespace: o.GetNamespace(), name: o.GetName(), rv: o.GetResourceVersion()})
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	total, pending := len(items), 0
	for _, o := range items {
		if rv, err := strconv.ParseUint(o.rv, 10, 64); err == nil && rv <= upTo {
			pending++
		}
	}
	for _, o := range items {
		if rv, err := strconv.ParseUint(o.rv, 10, 64); err != nil || rv > upTo {
			continue // written after the migration began: already current
		}
		err := c.rewrite(ctx, gvr, res, o)
		switch {
		case err == nil, apierrors.IsConflict(err), apierrors.IsNotFound(err):
			// A conflict or a missing object means someone wrote or deleted
			// it since the list: it is migrated or needs no migration.
			pending--
		case retriable(err):
			_ = c.setConditions(ctx, svm, c.condition(svmv1.MigrationRunning, metav1.ConditionTrue, ReasonRunning,
				runningMessage(pending, total)+"; transient error: "+err.Error()))
			return err
		default:
			return c.setConditions(ctx, svm,
				c.condition(svmv1.MigrationRunning, metav1.ConditionTrue, ReasonRunning, runningMessage(pending, total)),
				c.condition(svmv1.MigrationFailed, metav1.ConditionTrue, ReasonFailed,
					fmt.Sprintf("%d/%d not yet migrated. migration encountered unhandled error: %s", pending, total, err)))
		}
	}
	return c.setConditions(ctx, svm,
		c.condition(svmv1.MigrationRunning, metav1.ConditionTrue, ReasonRunning, runningMessage(0, total)),
		c.condition(svmv1.MigrationSucceeded, metav1.ConditionTrue, ReasonSucceeded, "Migration completed"))
}

type objectRef struct{ namespace, name, rv string }

// rewrite is the no-op patch: apiVersion, kind and the resourceVersion the
// object was listed at, which makes the write conditional on it.
func (c *controller) rewrite(ctx context.Context, gvr schema.GroupVersionResource, res metav1.APIResource, o objectRef) error {
	apiVersion := gvr.GroupVersion().String()
	patch, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": res.Kind, "metadata": map[string]string{"resourceVersion": o.rv}})
	if err != nil {
		return err
	}
	client := c.cfg.Dynamic.Resource(gvr)
	if res.Namespaced {
		_, err = client.Namespace(o.namespace).Patch(ctx, o.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: ControllerName})
	} else {
		_, err = client.Patch(ctx, o.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: ControllerName})
	}
	return err
}

func retriable(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || strings.Contains(err.Error(), "connection reset")
}

func runningMessage(pending, total int) string {
	msg := "The migration is running"
	switch {
	case total > 0 && pending > 0:
		msg += fmt.Sprintf(", %d/%d objects not yet migrated", pending, total)
	case total > 0:
		msg += fmt.Sprintf(", %d objects verified migrated", total)
	}
	return msg
}

func (c *controller) fail(ctx context.Context, svm *svmv1.StorageVersionMigration, msg string) error {
	return c.setConditions(ctx, svm, c.condition(svmv1.MigrationFailed, metav1.ConditionTrue, ReasonFailed, "migration encountered unhandled error: "+msg))
}

func (c *controller) condition(t svmv1.MigrationConditionType, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(c.clock.Now())}
}

// setConditions writes the conditions to the status when they change it.
func (c *controller) setConditions(ctx context.Context, svm *svmv1.StorageVersionMigration, conds ...metav1.Condition) error {
	changed := false
	for _, cond := range conds {
		changed = meta.SetStatusCondition(&svm.Status.Conditions, cond) || changed
	}
	if !changed {
		return nil
	}
	_, err := c.cfg.Client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}
