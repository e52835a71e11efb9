// Package podgc deletes the pods nobody else will (upstream's pod garbage
// collector): terminated pods beyond a threshold, oldest first; pods bound
// to a node that no longer exists; and terminating pods no kubelet will
// finish (never scheduled, or on a node declared out of service).
package podgc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

const (
	// DefaultTerminatedPodThreshold is upstream's default.
	DefaultTerminatedPodThreshold = 12500
	// DefaultPeriod is how often upstream looks.
	DefaultPeriod = 20 * time.Second
	// DefaultQuarantine is upstream's wait before believing a node gone.
	DefaultQuarantine = 40 * time.Second

	// ReasonDeletionByPodGC is both the DisruptionTarget condition reason
	// (as upstream) and the reason of the events this controller records.
	ReasonDeletionByPodGC = "DeletionByPodGC"
	// fieldManager owns the status fields written before a deletion.
	fieldManager = "PodGC"
	// deleters bounds the deletions in flight: a large backlog of
	// terminated pods goes quickly without flooding the API server.
	deleters = 8
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the pod and node
	// informers are taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records an Event on each pod deleted (none when nil).
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// TerminatedPodThreshold is how many terminated (Succeeded or Failed)
	// pods may exist before the oldest are deleted (default 12500;
	// negative: terminated pods are never deleted for their number).
	TerminatedPodThreshold int
	// Period is the time between passes (default 20s).
	Period time.Duration
	// Quarantine is how long a node must be missing from the cache before
	// it is looked up live and, when really gone, its pods deleted
	// (default 40s).
	Quarantine time.Duration
}

type collector struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	log       *slog.Logger
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	threshold int
	q         *quarantine
}

// Run collects pods every Period until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.Informers == nil {
		return errors.New("podgc: Client and Informers are required")
	}
	g := &collector{
		client:    cfg.Client,
		recorder:  cfg.Recorder,
		log:       cfg.Logger,
		pods:      cfg.Informers.Core().V1().Pods().Lister(),
		nodes:     cfg.Informers.Core().V1().Nodes().Lister(),
		threshold: cfg.TerminatedPodThreshold,
		q:         newQuarantine(cfg.Quarantine),
	}
	if g.threshold == 0 {
		g.threshold = DefaultTerminatedPodThreshold
	}
	if cfg.Quarantine == 0 {
		g.q.hold = DefaultQuarantine
	}
	period := cfg.Period
	if period <= 0 {
		period = DefaultPeriod
	}
	if g.recorder == nil {
		g.recorder = &record.FakeRecorder{}
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	podInf := cfg.Informers.Core().V1().Pods().Informer()
	nodeInf := cfg.Informers.Core().V1().Nodes().Informer()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
		return ctx.Err()
	}
	wait.UntilWithContext(ctx, g.pass, period)
	return nil
}

// pass is one sweep, in upstream's order.
func (g *collector) pass(ctx context.Context) {
	pods, err := g.pods.List(labels.Everything())
	if err != nil {
		g.log.Warn("pod gc: list pods", "err", err)
		return
	}
	nodeList, err := g.nodes.List(labels.Everything())
	if err != nil {
		g.log.Warn("pod gc: list nodes", "err", err)
		return
	}
	nodes := make(map[string]*corev1.Node, len(nodeList))
	names := sets.New[string]()
	for _, n := range nodeList {
		nodes[n.Name] = n
		names.Insert(n.Name)
	}
	// A pod taken by one rule is not taken again by the next in the same
	// pass (the list is a snapshot).
	taken := sets.New[types.UID]()
	var batch []removal
	add := func(pods []*corev1.Pod, mk func(*corev1.Pod) removal) {
		for _, p := range pods {
			if !taken.Has(p.UID) {
				taken.Insert(p.UID)
				batch = append(batch, mk(p))
			}
		}
	}
	if g.threshold > 0 {
		over := terminatedOverThreshold(pods, g.threshold)
		add(over, func(p *corev1.Pod) removal {
			return removal{pod: p, eventType: corev1.EventTypeNormal,
				message: fmt.Sprintf("Deleting terminated pod: %d terminated pods exceed the threshold of %d", len(over)+g.threshold, g.threshold)}
		})
	}
	add(terminatingOutOfService(pods, nodes), func(p *corev1.Pod) removal {
		return removal{pod: p, eventType: corev1.EventTypeWarning,
			message: fmt.Sprintf("Force deleting terminating pod on node %s, which is not ready and tainted %s", p.Spec.NodeName, outOfServiceTaint)}
	})
	gone := g.deletedNodes(ctx, missingNodes(pods, names))
	add(onNodes(pods, gone), func(p *corev1.Pod) removal {
		return removal{pod: p, eventType: corev1.EventTypeWarning, disruption: true,
			message: fmt.Sprintf("Deleting pod: node %s no longer exists", p.Spec.NodeName)}
	})
	add(unscheduledTerminating(pods), func(p *corev1.Pod) removal {
		return removal{pod: p, eventType: corev1.EventTypeWarning,
			message: "Force deleting terminating pod that was never scheduled"}
	})
	g.removeAll(ctx, batch)
}

// deletedNodes are the missing nodes whose quarantine is over and which
// the API server itself (not just the cache) no longer has.
func (g *collector) deletedNodes(ctx context.Context, missing sets.Set[string]) sets.Set[string] {
	out := sets.New[string]()
	for _, name := range g.q.due(missing, time.Now()) {
		_, err := g.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out.Insert(name)
		case err == nil:
			g.q.found(name)
		default:
			// Looked up again next pass.
			g.log.Warn("pod gc: get node", "node", name, "err", err)
		}
	}
	return out
}

func (g *collector) removeAll(ctx context.Context, batch []removal) {
	sem := make(chan struct{}, deleters)
	var wg sync.WaitGroup
	for _, r := range batch {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := g.remove(ctx, r); err != nil {
				g.log.Warn("pod gc: delete pod", "pod", r.pod.Namespace+"/"+r.pod.Name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// removal is one pod to delete and why.
type removal struct {
	pod       *corev1.Pod
	eventType string
	message   string
	// disruption adds the DisruptionTarget condition to the Failed status,
	// which tells a Job (pod failure policy) the pod did not fail by
	// itself.
	disruption bool
}

// remove marks a pod Failed, as upstream does, so that nothing sees a pod
// that vanished while Running (no kubelet will ever report it ended), then
// deletes it with no grace period. The pod's UID goes with every write:
// a pod created since under the same name is not touched.
func (g *collector) remove(ctx context.Context, r removal) error {
	p := r.pod
	if isTerminated(p) && p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0 {
		// Done on an earlier pass; only finalizers hold the pod now, and
		// whoever owns them removes them.
		return nil
	}
	if !isTerminated(p) {
		status := corev1apply.PodStatus().WithPhase(corev1.PodFailed)
		if r.disruption {
			status.WithConditions(corev1apply.PodCondition().
				WithType(corev1.DisruptionTarget).WithStatus(corev1.ConditionTrue).
				WithReason(ReasonDeletionByPodGC).WithMessage("PodGC: node no longer exists").
				WithLastTransitionTime(metav1.Now()))
		}
		apply := corev1apply.Pod(p.Name, p.Namespace).WithUID(p.UID).WithStatus(status)
		_, err := g.client.CoreV1().Pods(p.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("mark pod failed: %w", err)
		}
	}
	err := g.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &p.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete pod: %w", err)
	}
	g.log.Info("pod gc: deleted pod", "pod", p.Namespace+"/"+p.Name, "why", r.message)
	g.recorder.Event(p, r.eventType, ReasonDeletionByPodGC, r.message)
	return nil
}
