package flowcontrol

import (
	"context"
	"fmt"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
)

// configKey is the one key of the work queue: any change to any object
// rebuilds the whole configuration, as upstream's config consumer does.
const configKey = "config"

// Run follows the FlowSchemas and PriorityLevelConfigurations through
// client until ctx ends: every change rebuilds the classification, and the
// FlowSchemas' Dangling conditions are kept up to date. It also keeps the
// bootstrap objects (Ensure at start, then every EnsureInterval).
func (c *Controller) Run(ctx context.Context, client kubernetes.Interface) error {
	factory := informers.NewSharedInformerFactory(client, 0)
	fsInformer := factory.Flowcontrol().V1().FlowSchemas()
	plInformer := factory.Flowcontrol().V1().PriorityLevelConfigurations()
	q := worker.New(worker.Config{Name: "flowcontrol", Log: c.log, Message: "flow-control configuration sync failed", Noun: "key",
		Quiet: apierrors.IsConflict, QuietMessage: "flow-control status write lost a race"})
	changed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { q.Add(configKey) },
		UpdateFunc: func(any, any) { q.Add(configKey) },
		DeleteFunc: func(any) { q.Add(configKey) },
	}
	for _, inf := range []cache.SharedIndexInformer{fsInformer.Informer(), plInformer.Informer()} {
		if _, err := inf.AddEventHandler(changed); err != nil {
			return fmt.Errorf("flowcontrol: %w", err)
		}
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.maintainBootstrap(ctx, client) })
	if !cache.WaitForCacheSync(ctx.Done(), fsInformer.Informer().HasSynced, plInformer.Informer().HasSynced) {
		return ctx.Err()
	}
	fsLister, plLister := fsInformer.Lister(), plInformer.Lister()
	q.Run(ctx, 1, func(ctx context.Context, _ string) error {
		return c.sync(ctx, client, fsLister, plLister)
	})
	return nil
}

// maintainBootstrap ensures the bootstrap objects: every second until it
// first succeeds, then every EnsureInterval.
func (c *Controller) maintainBootstrap(ctx context.Context, client kubernetes.Interface) {
	for {
		err := Ensure(ctx, client.FlowcontrolV1())
		if err != nil && ctx.Err() == nil {
			c.log.Warn("flow-control bootstrap configuration", "err", err)
		}
		if err == nil {
			c.ensured.Store(true)
		}
		wait := c.cfg.EnsureInterval
		if !c.ensured.Load() {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// sync rebuilds the configuration from the informers' caches and writes the
// Dangling conditions that changed.
func (c *Controller) sync(ctx context.Context, client kubernetes.Interface, fsLister flowcontrollisters.FlowSchemaLister, plLister flowcontrollisters.PriorityLevelConfigurationLister) error {
	schemas, err := fsLister.List(labels.Everything())
	if err != nil {
		return err
	}
	levels, err := plLister.List(labels.Everything())
	if err != nil {
		return err
	}
	found := c.rebuild(schemas, levels)
	var errs []error
	for _, fs := range schemas {
		want := danglingCondition(fs, !found[fs.Name], time.Now())
		if want == nil {
			continue
		}
		updated := fs.DeepCopy()
		setCondition(&updated.Status, *want)
		_, err := client.FlowcontrolV1().FlowSchemas().UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: "api-priority-and-fairness-config-consumer-v1"})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("status of %s: %w", fs.Name, err))
		}
	}
	if len(errs) > 0 {
		return errs[0] // the sync is retried as a whole
	}
	return nil
}

// danglingCondition is the Dangling condition fs should have, or nil when
// it has it already.
func danglingCondition(fs *flowcontrolv1.FlowSchema, dangling bool, now time.Time) *flowcontrolv1.FlowSchemaCondition {
	plName := fs.Spec.PriorityLevelConfiguration.Name
	want := flowcontrolv1.FlowSchemaCondition{
		Type:    flowcontrolv1.FlowSchemaConditionDangling,
		Status:  flowcontrolv1.ConditionFalse,
		Reason:  "Found",
		Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", plName),
	}
	if dangling {
		want.Status, want.Reason = flowcontrolv1.ConditionTrue, "NotFound"
		want.Message = fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", plName)
	}
	for _, c := range fs.Status.Conditions {
		if c.Type == want.Type && c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
			return nil
		}
	}
	want.LastTransitionTime = metav1.NewTime(now)
	return &want
}

// setCondition replaces the condition of the same type, or adds it.
func setCondition(status *flowcontrolv1.FlowSchemaStatus, cond flowcontrolv1.FlowSchemaCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == cond.Type {
			status.Conditions[i] = cond
			return
		}
	}
	status.Conditions = append(status.Conditions, cond)
}
