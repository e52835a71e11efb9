// Package disruption keeps the status of PodDisruptionBudgets (policy/v1)
// current (upstream's disruption controller): how many selected pods are
// expected and healthy, how many must stay healthy, and so how many
// voluntary disruptions (evictions) are allowed right now. The eviction
// subresource decides from this status, so it must follow pod readiness
// closely, and fails safe (no disruption allowed) when it cannot be
// computed.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/worker"
)

// DefaultWorkers: budgets are few and cheap to compute; upstream runs one.
const DefaultWorkers = 2

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; Run takes the
	// PodDisruptionBudget, Pod, ReplicationController, ReplicaSet,
	// Deployment and StatefulSet informers from it.
	Informers informers.SharedInformerFactory
	// Recorder receives the events; when nil, Run records to the API
	// server as "controllermanager", upstream's source for these.
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// Workers is how many budgets are synced at once (DefaultWorkers when
	// zero).
	Workers int
}

type controller struct {
	cfg      Config
	log      *slog.Logger
	recorder record.EventRecorder
	queue    *worker.Queue
	pdbs     policylisters.PodDisruptionBudgetLister
	pods     corelisters.PodLister
	rcs      corelisters.ReplicationControllerLister
	rss      appslisters.ReplicaSetLister
	deploys  appslisters.DeploymentLister
	sets     appslisters.StatefulSetLister
}

// Run keeps budget statuses up to date until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("disruption controller: Client and Informers are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	c := &controller{cfg: cfg, log: cfg.Logger, recorder: cfg.Recorder}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.recorder == nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
		defer b.Shutdown()
		c.recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "controllermanager"})
	}
	c.queue = worker.New(worker.Config{Name: "disruption", Log: c.log, Message: "disruption budget sync", Noun: "pdb", Quiet: apierrors.IsConflict})
	defer c.queue.ShutDown()

	f := cfg.Informers
	pdbInf, podInf := f.Policy().V1().PodDisruptionBudgets(), f.Core().V1().Pods()
	rcInf, rsInf := f.Core().V1().ReplicationControllers(), f.Apps().V1().ReplicaSets()
	depInf, ssInf := f.Apps().V1().Deployments(), f.Apps().V1().StatefulSets()
	c.pdbs, c.pods, c.rcs, c.rss, c.deploys, c.sets = pdbInf.Lister(), podInf.Lister(), rcInf.Lister(), rsInf.Lister(), depInf.Lister(), ssInf.Lister()
	scaleHandler := cache.ResourceEventHandlerFuncs{AddFunc: c.controllerChanged, UpdateFunc: c.controllerUpdated, DeleteFunc: c.controllerChanged}
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: pdbInf.Informer(), Handler: c.queue.Handlers()},
		worker.Subscription{Informer: podInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{AddFunc: c.podChanged, UpdateFunc: c.podUpdated, DeleteFunc: c.podChanged}},
		worker.Subscription{Informer: rcInf.Informer(), Handler: scaleHandler},
		worker.Subscription{Informer: rsInf.Informer(), Handler: scaleHandler},
		worker.Subscription{Informer: depInf.Informer(), Handler: scaleHandler},
		worker.Subscription{Informer: ssInf.Informer(), Handler: scaleHandler},
	)
	if err != nil {
		return fmt.Errorf("disruption controller: add event handler: %w", err)
	}
	defer unsubscribe()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	c.queue.Run(ctx, cfg.Workers, c.sync)
	return nil
}

// budgetsFor enqueues every budget selecting the pod (upstream picks one;
// with overlapping budgets all of them must be kept right).
func (c *controller) budgetsFor(pod *corev1.Pod) {
	pdbs, err := c.pdbs.GetPodPodDisruptionBudgets(pod)
	if err != nil {
		return // none selects it
	}
	for _, pdb := range pdbs {
		c.queue.Add(pdb.Namespace + "/" + pdb.Name)
	}
}

func (c *controller) podChanged(obj any) {
	if pod, ok := worker.Unwrap[*corev1.Pod](obj); ok {
		c.budgetsFor(pod)
	}
}

// podUpdated skips updates that change nothing a budget counts.
func (c *controller) podUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	labelsChanged := !labels.Equals(old.Labels, cur.Labels)
	if !labelsChanged && isPodReady(old) == isPodReady(cur) && (old.DeletionTimestamp == nil) == (cur.DeletionTimestamp == nil) &&
		slices.EqualFunc(old.OwnerReferences, cur.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID }) {
		return
	}
	c.budgetsFor(cur)
	if labelsChanged {
		c.budgetsFor(old)
	}
}

// controllerUpdated reacts to scale changes only: percentages are
// relative to the controllers' replica counts.
func (c *controller) controllerUpdated(oldObj, newObj any) {
	if replicas(oldObj) != replicas(newObj) {
		c.controllerChanged(newObj)
	}
}

func replicas(obj any) int32 {
	var r *int32
	switch o := obj.(type) {
	case *corev1.ReplicationController:
		r = o.Spec.Replicas
	case *appsv1.ReplicaSet:
		r = o.Spec.Replicas
	case *appsv1.Deployment:
		r = o.Spec.Replicas
	case *appsv1.StatefulSet:
		r = o.Spec.Replicas
	}
	if r == nil {
		return 1
	}
	return *r
}

// controllerChanged resyncs the budgets of the controller's namespace;
// there are few, and matching them to the controller's pods would cost
// more than syncing them.
func (c *controller) controllerChanged(obj any) {
	m, ok := worker.Unwrap[metav1.Object](obj)
	if !ok {
		return
	}
	pdbs, err := c.pdbs.PodDisruptionBudgets(m.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pdb := range pdbs {
		c.queue.Add(pdb.Namespace + "/" + pdb.Name)
	}
}

// findScale resolves a pod's controller reference to the workload whose
// replica count governs it: a ReplicaSet run by a Deployment answers
// with the Deployment, whose count the ReplicaSets' follow.
func (c *controller) findScale(ref *metav1.OwnerReference, ns string) (scale, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return scale{}, false
	}
	group := gv.Group
	switch {
	case ref.Kind == "ReplicationController" && group == "":
		rc, err := c.rcs.ReplicationControllers(ns).Get(ref.Name)
		if err != nil || rc.UID != ref.UID {
			return scale{}, false
		}
		return scale{rc.UID, deref(rc.Spec.Replicas)}, true
	case ref.Kind == "StatefulSet" && group == "apps":
		ss, err := c.sets.StatefulSets(ns).Get(ref.Name)
		if err != nil || ss.UID != ref.UID {
			return scale{}, false
		}
		return scale{ss.UID, deref(ss.Spec.Replicas)}, true
	case ref.Kind == "ReplicaSet" && (group == "apps" || group == "extensions"):
		rs, err := c.rss.ReplicaSets(ns).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			return scale{}, false
		}
		owner := metav1.GetControllerOf(rs)
		if owner == nil || owner.Kind != "Deployment" {
			return scale{rs.UID, deref(rs.Spec.Replicas)}, true
		}
		d, err := c.deploys.Deployments(ns).Get(owner.Name)
		if err != nil || d.UID != owner.UID {
			return scale{}, false
		}
		return scale{d.UID, deref(d.Spec.Replicas)}, true
	}
	return scale{}, false
}

func deref(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// sync recomputes one budget's status, falling back to "no disruption
// allowed" when it cannot.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbs.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.trySync(ctx, pdb)
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	if st := failedStatus(pdb, err); !statusEqual(&st, &pdb.Status) {
		updated := pdb.DeepCopy()
		updated.Status = st
		if _, uerr := c.cfg.Client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); uerr != nil {
			return errors.Join(err, fmt.Errorf("fail-safe status: %w", uerr))
		}
	}
	return err
}

func (c *controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return fmt.Errorf("selector: %w", err)
	}
	pods, err := c.pods.Pods(pdb.Namespace).List(sel)
	if err != nil {
		return err
	}
	expected, desired, unmanaged, err := expectedAndDesired(pdb, pods, c.findScale)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	now := time.Now()
	live, expired, recheck := liveDisruptions(pdb, pods, now)
	st := newStatus(pdb, countHealthy(pods, live), desired, expected, live)
	if recheck != nil {
		c.queue.AddAfter(pdb.Namespace+"/"+pdb.Name, recheck.Sub(now))
	}
	if statusEqual(&st, &pdb.Status) {
		return nil
	}
	updated := pdb.DeepCopy()
	updated.Status = st
	if _, err := c.cfg.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	// Events go with the writes: the status only changes when something
	// happened, while syncs also come from the controller's own writes.
	if len(pods) == 0 {
		c.recorder.Event(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	if len(unmanaged) > 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", sel)
	}
	for _, pod := range expired {
		c.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
	}
	return nil
}
