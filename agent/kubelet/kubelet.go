package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Kubelet runs the pods bound to one node.
type Kubelet struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.WithTicker
	recorder record.EventRecorder
	backoff  *backoff

	broadcaster record.EventBroadcaster
	lister      listerscorev1.PodLister

	mu       sync.Mutex
	ctx      context.Context
	workers  map[types.UID]*podWorker
	byID     map[string]types.UID // container ID → pod UID
	finished map[types.UID]bool   // pods whose final delete was sent
	static   map[types.UID]*corev1.Pod
	nodeUID  types.UID
	staticCh chan struct{}
	ready    chan struct{} // closed once adoption is done and pods flow
	pressure pressure
	// housekeepingErrs are failures already logged, by key.
	housekeepingErrs map[string]bool
}

// New checks the configuration and makes a kubelet; Run starts it.
func New(cfg Config) (*Kubelet, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	k := &Kubelet{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "kubelet"),
		clock:    cfg.Clock,
		recorder: cfg.Recorder,
		backoff:  newBackoff(cfg.Clock),
		workers:  map[types.UID]*podWorker{},
		byID:     map[string]types.UID{},
		finished: map[types.UID]bool{},
		static:   map[types.UID]*corev1.Pod{},
		staticCh: make(chan struct{}, 1),
		ready:    make(chan struct{}),

		housekeepingErrs: map[string]bool{},
	}
	if k.recorder == nil {
		k.broadcaster = record.NewBroadcaster()
		k.recorder = k.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: cfg.NodeName})
	}
	return k, nil
}

// Run watches the node's pods and runs them until ctx ends. On start it
// adopts the containers, networks and volumes of pods that still exist and
// removes those of pods that don't.
func (k *Kubelet) Run(ctx context.Context) error {
	if k.broadcaster != nil {
		k.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.cfg.Client.CoreV1().Events("")})
		defer k.broadcaster.Shutdown()
	}
	k.mu.Lock()
	k.ctx = ctx
	k.mu.Unlock()

	factory := informers.NewSharedInformerFactoryWithOptions(k.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
		}))
	inf := factory.Core().V1().Pods()
	informer := inf.Informer()
	k.lister = inf.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("kubelet: pod informer never synced: %w", ctx.Err())
	}
	k.loadStatic()
	k.adopt(ctx)
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.podChanged(o) },
		UpdateFunc: k.podUpdated,
		DeleteFunc: k.podDeleted,
	}); err != nil {
		return fmt.Errorf("kubelet: pod handler: %w", err)
	}
	close(k.ready)

	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); k.runtimeEvents(ctx) }()
	go func() { defer wg.Done(); k.resyncLoop(ctx) }()
	go func() { defer wg.Done(); k.staticLoop(ctx) }()
	<-ctx.Done()
	wg.Wait()
	k.waitWorkers()
	return nil
}

// isMirror reports whether p is the API mirror of a static pod.
func isMirror(p *corev1.Pod) bool {
	_, ok := p.Annotations[annotationMirror]
	return ok
}

func (k *Kubelet) podChanged(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != k.cfg.NodeName {
		return
	}
	if isMirror(pod) {
		k.kickStatic()
		return
	}
	k.mu.Lock()
	if k.finished[pod.UID] {
		k.mu.Unlock()
		return
	}
	k.mu.Unlock()
	k.ensureWorker(pod, false, nil).setPod(pod)
}

// podUpdated skips the resync when only the kubelet's own status changed
// (its own writes come back through the watch).
func (k *Kubelet) podUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if ok1 && ok2 && !isMirror(pod) && onlyOwnStatusChanged(old, pod) {
		k.mu.Lock()
		w := k.workers[pod.UID]
		k.mu.Unlock()
		if w != nil {
			w.mu.Lock()
			if !w.removed {
				w.pod = pod
			}
			w.mu.Unlock()
			return
		}
	}
	k.podChanged(newObj)
}

func onlyOwnStatusChanged(old, pod *corev1.Pod) bool {
	if !equality.Semantic.DeepEqual(old.Spec, pod.Spec) || !equality.Semantic.DeepEqual(old.ObjectMeta.DeletionTimestamp, pod.ObjectMeta.DeletionTimestamp) {
		return false
	}
	foreign := func(p *corev1.Pod) []corev1.PodCondition {
		var out []corev1.PodCondition
		for _, c := range p.Status.Conditions {
			if !ownConditions[c.Type] {
				out = append(out, c)
			}
		}
		return out
	}
	return equality.Semantic.DeepEqual(foreign(old), foreign(pod))
}

func (k *Kubelet) podDeleted(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	if isMirror(pod) {
		k.kickStatic()
		return
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	delete(k.finished, pod.UID)
	k.mu.Unlock()
	if w != nil {
		w.markRemoved(pod)
	}
}

// ensureWorker returns the pod's worker, starting one (with adopted
// records) when there is none.
func (k *Kubelet) ensureWorker(pod *corev1.Pod, static bool, adopted []*ctrRecord) *podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w, ok := k.workers[pod.UID]; ok {
		return w
	}
	w := newPodWorker(k, pod, static, adopted)
	for _, r := range adopted {
		k.byID[r.id] = pod.UID
	}
	k.workers[pod.UID] = w
	ctx := k.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	w.start(ctx)
	return w
}

// workerDone forgets a pod whose worker finished.
func (k *Kubelet) workerDone(w *podWorker, sentDelete bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.workers[w.uid] == w {
		delete(k.workers, w.uid)
	}
	for id, uid := range k.byID {
		if uid == w.uid {
			delete(k.byID, id)
		}
	}
	if sentDelete {
		k.finished[w.uid] = true
	}
	k.backoff.forget("pull/" + string(w.uid) + "/")
	k.backoff.forget(string(w.uid) + "/")
}

func (k *Kubelet) trackContainer(id string, uid types.UID) {
	k.mu.Lock()
	k.byID[id] = uid
	k.mu.Unlock()
}

func (k *Kubelet) forgetContainer(id string) {
	k.mu.Lock()
	delete(k.byID, id)
	k.mu.Unlock()
}

func (k *Kubelet) allWorkers() []*podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*podWorker, 0, len(k.workers))
	for _, w := range k.workers {
		out = append(out, w)
	}
	return out
}

func (k *Kubelet) waitWorkers() {
	for _, w := range k.allWorkers() {
		<-w.stopped
	}
}

// runtimeEvents resyncs a pod at once when one of its containers exits.
func (k *Kubelet) runtimeEvents(ctx context.Context) {
	for id := range k.cfg.Runtime.Events(ctx) {
		k.mu.Lock()
		w := k.workers[k.byID[id]]
		k.mu.Unlock()
		if w != nil {
			w.kick()
		}
	}
}

func (k *Kubelet) resyncLoop(ctx context.Context) {
	t := k.clock.NewTicker(k.cfg.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			for _, w := range k.allWorkers() {
				w.kick()
			}
			k.housekeeping()
			if !k.cfg.DisableEviction {
				k.evictOnce(ctx)
			}
		}
	}
}

// event records an event on the pod.
func (k *Kubelet) event(pod *corev1.Pod, typ, reason, format string, args ...any) {
	k.recorder.Eventf(pod, typ, reason, format, args...)
}

func (k *Kubelet) now() time.Time { return k.clock.Now() }
