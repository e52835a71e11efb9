// Package clusterroleaggregation keeps every ClusterRole that has an
// aggregationRule filled with the rules of the ClusterRoles its selectors
// match, so that adding a role labelled aggregate-to-view extends "view"
// (upstream's clusterrole-aggregation controller).
package clusterroleaggregation

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"skiff/server/auth/rbac"
	"skiff/server/controller/worker"
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	Logger *slog.Logger
}

// Run reconciles aggregated ClusterRoles until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, 10*time.Minute)
	inf := factory.Rbac().V1().ClusterRoles().Informer()
	lister := factory.Rbac().V1().ClusterRoles().Lister()
	q := worker.New(worker.Config{Log: log, Message: "cluster role aggregation", Noun: "clusterrole"})
	defer q.ShutDown()
	// Any change may matter to any aggregated role: requeue them all.
	requeue := func(any) {
		roles, _ := lister.List(labels.Everything())
		for _, r := range roles {
			if r.AggregationRule != nil {
				q.Add(r.Name)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: requeue, UpdateFunc: func(_, n any) { requeue(n) }, DeleteFunc: requeue}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	q.Run(ctx, 1, func(ctx context.Context, name string) error { return sync(ctx, cfg.Client, lister, name) })
	return nil
}

func sync(ctx context.Context, client kubernetes.Interface, lister listers.ClusterRoleLister, name string) error {
	target, err := lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || target.AggregationRule == nil {
		return err
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, changed := rbac.Aggregate(target, all)
	if !changed {
		return nil
	}
	updated := target.DeepCopy()
	updated.Rules = rules
	if _, err := client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update aggregated rules: %w", err)
	}
	return nil
}
