// Package aggregator serves aggregated APIs as upstream's kube-aggregator
// does: apiregistration.k8s.io/v1 APIServices name the group-versions an
// extension API server behind a Service serves; requests for them are
// proxied there (after authentication and authorization) with the
// caller's identity in X-Remote-* headers vouched for by the front-proxy
// client certificate. It keeps a local APIService per group-version the
// server itself serves, the Available condition of every APIService, and
// the discovery of the extension API servers, which the API server merges
// into its own.
package aggregator

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/server/apiserver"
	"skiff/server/controller/worker"
	"skiff/server/registry"
)

// Config wires the aggregator.
type Config struct {
	// REST reaches the API server with the rights to manage APIServices
	// (the in-process config of system:apiserver); Client is the same, typed.
	REST   *rest.Config
	Client kubernetes.Interface
	// Registry is what this server serves: its group-versions get local
	// APIServices.
	Registry *registry.Registry
	// ProxyClientCert is the front-proxy client certificate presented to
	// extension API servers.
	ProxyClientCert tls.Certificate
	// ClientCA and RequestHeaderCA (PEM) are published in
	// kube-system/extension-apiserver-authentication: the cluster CA and
	// the front-proxy CA. Without RequestHeaderCA no front-proxy settings
	// are published.
	ClientCA, RequestHeaderCA []byte
	// Dial reaches extension API servers at their pods' addresses (a
	// net.Dialer when nil; tests point it elsewhere).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// LocalResync is how often local APIServices are compared with the
	// registry besides Notify (1 minute when zero); CheckInterval how
	// often each remote APIService is checked again (upstream's 30 s when
	// zero).
	LocalResync, CheckInterval time.Duration
	Logger                     *slog.Logger
}

// Aggregator is the apiserver.Aggregator of the server, and the loops
// behind it. Until Run has read the APIServices, nothing is remote.
type Aggregator struct {
	cfg                Config
	log                *slog.Logger
	apiServices        *apiServices
	apiServiceInformer cache.SharedIndexInformer
	transports         *transports
	discovery          *discoveryCache

	// Set by Run before the informer starts, read by Proxy and Remote.
	mu       sync.RWMutex
	resolver *resolver

	local, status, refresh *worker.Queue
}

var _ apiserver.Aggregator = (*Aggregator)(nil)

const localKey = "local"

// New makes the aggregator; Run starts it.
func New(cfg Config) (*Aggregator, error) {
	if cfg.REST == nil || cfg.Client == nil || cfg.Registry == nil {
		return nil, errors.New("aggregator: REST, Client and Registry are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if cfg.LocalResync <= 0 {
		cfg.LocalResync = time.Minute
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 30 * time.Second
	}
	client, err := newAPIServices(cfg.REST)
	if err != nil {
		return nil, err
	}
	a := &Aggregator{cfg: cfg, log: cfg.Logger, apiServices: client, apiServiceInformer: client.informer(),
		transports: &transports{dial: cfg.Dial, client: cfg.ProxyClientCert, byName: map[string]cachedTransport{}},
		discovery:  newDiscoveryCache()}
	quiet := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }
	a.local = worker.New(worker.Config{Name: "local-apiservices", Log: a.log, Message: "local APIService sync", Noun: "key", Quiet: quiet})
	// Upstream's tight retries: availability depends on the network too.
	a.status = worker.New(worker.Config{Name: "apiservice-availability", Log: a.log, Message: "APIService availability", Noun: "apiservice", Quiet: quiet,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second)})
	a.refresh = worker.New(worker.Config{Name: "apiservice-discovery", Log: a.log, Message: "APIService discovery", Noun: "apiservice", Quiet: func(error) bool { return true },
		QuietMessage: "APIService discovery fetch failed",
		RateLimiter:  workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, discoveryRefresh)})
	return a, nil
}

// Notify tells the aggregator that the registry's group-versions changed
// (a CustomResourceDefinition's rows were added or removed).
func (a *Aggregator) Notify() { a.local.Add(localKey) }

// Run keeps APIServices, their availability and the extension servers'
// discovery current until ctx ends.
func (a *Aggregator) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(a.cfg.Client, 0)
	defer factory.Shutdown()
	svcInf, sliceInf := factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices()
	res := &resolver{services: svcInf.Lister(), slices: sliceInf.Lister()}
	a.mu.Lock()
	a.resolver = res
	a.mu.Unlock()
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: a.apiServiceInformer, Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: a.apiServiceChanged, UpdateFunc: func(old, cur any) { a.apiServiceUpdated(old, cur) }, DeleteFunc: a.apiServiceChanged}},
		worker.Subscription{Informer: svcInf.Informer(), Handler: a.serviceHandlers()},
		worker.Subscription{Informer: sliceInf.Informer(), Handler: a.serviceHandlers()},
	)
	if err != nil {
		return err
	}
	defer unsubscribe()
	var wg sync.WaitGroup
	informerCtx, stopInformer := context.WithCancel(ctx)
	wg.Go(func() { a.apiServiceInformer.RunWithContext(informerCtx) })
	defer func() { stopInformer(); wg.Wait() }()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // stopping
	}
	ck := &checker{services: listerReads{*res}, slices: listerReads{*res}, resolver: *res, transports: a.transports}
	f := &fetcher{resolver: *res, transports: a.transports}
	a.Notify()
	wg.Go(func() { a.local.Run(ctx, 1, a.syncLocal) })
	wg.Go(func() {
		a.status.Run(ctx, 2, func(ctx context.Context, name string) error { return a.syncStatus(ctx, ck, name) })
	})
	wg.Go(func() {
		a.refresh.Run(ctx, 2, func(ctx context.Context, name string) error { return a.syncDiscovery(ctx, f, name) })
	})
	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { a.Notify() }, a.cfg.LocalResync) })
	wg.Go(func() { a.publishLoop(ctx) })
	<-ctx.Done()
	return nil
}

// publishLoop keeps the extension-apiserver-authentication ConfigMap, and
// puts it back if it is deleted or changed.
func (a *Aggregator) publishLoop(ctx context.Context) {
	data, err := authenticationData(a.cfg.ClientCA, a.cfg.RequestHeaderCA, frontProxyAllowCNs)
	if err != nil {
		a.log.Error("extension-apiserver-authentication", "err", err)
		return
	}
	for {
		next := time.Minute
		if err := publishAuthentication(ctx, a.cfg.Client, data); err != nil && ctx.Err() == nil {
			// At start kube-system may not exist yet: try again soon.
			a.log.Debug("cannot publish the extension API server authentication yet", "err", err)
			next = 2 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

func (a *Aggregator) apiServiceChanged(obj any) {
	s, ok := worker.Unwrap[*apiregistrationv1.APIService](obj)
	if !ok {
		return
	}
	a.status.Add(s.Name)
	a.refresh.Add(s.Name)
	if _, managed := s.Labels[automanagedLabel]; managed {
		a.Notify()
	}
}

// apiServiceUpdated checks availability again when the spec changed, and
// fetches discovery again when availability did.
func (a *Aggregator) apiServiceUpdated(old, cur any) {
	o, ok1 := old.(*apiregistrationv1.APIService)
	c, ok2 := cur.(*apiregistrationv1.APIService)
	if !ok1 || !ok2 {
		return
	}
	if !equality.Semantic.DeepEqual(o.Spec, c.Spec) || !reflect.DeepEqual(o.Labels, c.Labels) {
		a.apiServiceChanged(c)
		return
	}
	if available(o) != available(c) {
		a.refresh.Add(c.Name)
	}
	a.status.Add(c.Name) // a status written by someone else is corrected
}

// serviceHandlers check the APIServices of a Service again when it or its
// EndpointSlices change.
func (a *Aggregator) serviceHandlers() cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		var ns, name string
		switch o := obj.(type) {
		case cache.DeletedFinalStateUnknown:
			if key, err := cache.MetaNamespaceKeyFunc(o.Obj); err == nil {
				ns, name, _ = cache.SplitMetaNamespaceKey(key)
				if sl, ok := o.Obj.(*discoveryv1.EndpointSlice); ok {
					name = sl.Labels[discoveryv1.LabelServiceName]
				}
			}
		case *corev1.Service:
			ns, name = o.Namespace, o.Name
		case *discoveryv1.EndpointSlice:
			ns, name = o.Namespace, o.Labels[discoveryv1.LabelServiceName]
		}
		for _, obj := range a.apiServiceInformer.GetStore().List() {
			s := obj.(*apiregistrationv1.APIService)
			if s.Spec.Service != nil && s.Spec.Service.Namespace == ns && s.Spec.Service.Name == name {
				a.status.Add(s.Name)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue}
}

// syncStatus sets the Available condition of one APIService, writing only
// when it changed; remote ones are looked at again every CheckInterval.
func (a *Aggregator) syncStatus(ctx context.Context, ck *checker, name string) error {
	obj, exists, err := a.apiServiceInformer.GetStore().GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		a.transports.forget(name)
		return nil
	}
	orig := obj.(*apiregistrationv1.APIService)
	next := orig.DeepCopy()
	if orig.Spec.Service == nil {
		setCondition(next, localCondition())
	} else {
		setCondition(next, ck.check(ctx, orig))
		a.status.AddAfter(name, a.cfg.CheckInterval)
	}
	if equality.Semantic.DeepEqual(orig.Status, next.Status) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c := condition(next, apiregistrationv1.Available)
	a.log.Debug("APIService availability", "apiservice", name, "status", c.Status, "reason", c.Reason, "message", c.Message)
	_, err = a.apiServices.updateStatus(ctx, next)
	return err
}

// syncDiscovery reads the discovery of one remote APIService when it is
// available, and again every discoveryRefresh.
func (a *Aggregator) syncDiscovery(ctx context.Context, f *fetcher, name string) error {
	obj, exists, err := a.apiServiceInformer.GetStore().GetByKey(name)
	if err != nil {
		return err
	}
	s, _ := obj.(*apiregistrationv1.APIService)
	if !exists || s.Spec.Service == nil {
		a.discovery.forget(name)
		return nil
	}
	if !available(s) {
		a.discovery.put(name, nil, errUnavailable)
		return nil // the availability change enqueues it again
	}
	v, err := f.fetch(ctx, s)
	a.discovery.put(name, v, err)
	if err == nil {
		a.refresh.AddAfter(name, discoveryRefresh)
	}
	return err
}

// Proxy implements apiserver.Aggregator.
func (a *Aggregator) Proxy(group, version string) (http.Handler, bool) {
	s := a.remote(version + "." + group)
	if s == nil {
		return nil, false
	}
	a.mu.RLock()
	res := a.resolver
	a.mu.RUnlock()
	if res == nil {
		return nil, false
	}
	return &proxyHandler{api: s, resolver: *res, transports: a.transports, log: a.log}, true
}

// remote is the APIService of that name when it has a Service.
func (a *Aggregator) remote(name string) *apiregistrationv1.APIService {
	obj, exists, err := a.apiServiceInformer.GetStore().GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	s := obj.(*apiregistrationv1.APIService)
	if s.Spec.Service == nil {
		return nil
	}
	return s
}

// Remote implements apiserver.Aggregator.
func (a *Aggregator) Remote() []apiserver.RemoteVersion {
	var out []apiserver.RemoteVersion
	for _, obj := range a.apiServiceInformer.GetStore().List() {
		s := obj.(*apiregistrationv1.APIService)
		if s.Spec.Service == nil {
			continue
		}
		rv := apiserver.RemoteVersion{Group: s.Spec.Group, Version: s.Spec.Version,
			GroupPriority: s.Spec.GroupPriorityMinimum, VersionPriority: s.Spec.VersionPriority, Stale: true}
		if e, ok := a.discovery.get(s.Name); ok {
			rv.Discovery, rv.Stale = e.version, e.err != nil || e.version == nil
		}
		if !available(s) {
			rv.Stale = true
		}
		out = append(out, rv)
	}
	return out
}

// Priority implements apiserver.Aggregator.
func (a *Aggregator) Priority(group, version string) (int32, int32) {
	gv := schema.GroupVersion{Group: group, Version: version}
	for _, r := range a.cfg.Registry.All() {
		if r.Group == group && r.Version == version && r.Custom {
			return customPriority.group, customPriority.version
		}
	}
	p := localPriority(gv)
	return p.group, p.version
}
