// Package serviceaccount keeps every namespace supplied with what pods
// expect to find there: the "default" ServiceAccount, and the
// kube-root-ca.crt ConfigMap holding the cluster CA (upstream's service
// account and root-CA-publisher controllers).
package serviceaccount

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
)

// RootCAConfigMap is the ConfigMap every namespace gets with the cluster CA.
const RootCAConfigMap = "kube-root-ca.crt"

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// CACert is the PEM of the cluster CA, published as ca.crt.
	CACert []byte
	Logger *slog.Logger
}

// Run reconciles namespaces until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, 10*time.Minute)
	// Only the objects this controller owns are watched: the default
	// service accounts and the root CA config maps, not every one.
	named := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name })
	}
	nsInf := factory.Core().V1().Namespaces().Informer()
	saFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 10*time.Minute, named("default"))
	cmFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 10*time.Minute, named(RootCAConfigMap))
	saInf := saFactory.Core().V1().ServiceAccounts().Informer()
	cmInf := cmFactory.Core().V1().ConfigMaps().Informer()
	q := worker.New(worker.Config{Log: log, Message: "service account sync", Noun: "namespace"})
	defer q.ShutDown()
	enqueueNS := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			q.Add(ns.Name)
		}
	}
	enqueueOwner := func(obj any) {
		if m, ok := worker.Unwrap[metav1.Object](obj); ok {
			q.Add(m.GetNamespace())
		}
	}
	if _, err := nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueNS, UpdateFunc: func(_, n any) { enqueueNS(n) }}); err != nil {
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{saInf, cmInf} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: enqueueOwner, UpdateFunc: func(_, n any) { enqueueOwner(n) }}); err != nil {
			return err
		}
	}
	for _, f := range []informers.SharedInformerFactory{factory, saFactory, cmFactory} {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), nsInf.HasSynced, saInf.HasSynced, cmInf.HasSynced) {
		return ctx.Err()
	}
	r := &reconciler{cfg: cfg, ns: factory.Core().V1().Namespaces().Lister(), sa: saFactory.Core().V1().ServiceAccounts().Lister(), cm: cmFactory.Core().V1().ConfigMaps().Lister()}
	q.Run(ctx, 1, r.sync)
	return nil
}
