package scheduler

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"skiff/server/scheduler/algorithm"
)

// scheduleOne schedules the next pod; false once the queue is closed.
func (s *sched) scheduleOne(ctx context.Context) bool {
	qp, pod, ok := s.queue.pop()
	if !ok {
		return false
	}
	alg := s.algs[pod.Spec.SchedulerName]
	if alg == nil || s.cache.isAssumed(pod.UID) {
		s.queue.remove(pod.UID)
		return true
	}
	s.cache.update(s.snap)
	s.snap.nominated = s.queue.nominations()
	res, err := alg.Schedule(pod, s.snap)
	if err != nil {
		s.failed(ctx, qp, pod, alg, err)
		return true
	}
	// A shallow copy: the informer's pod is shared and must not change,
	// but nothing below writes through the copy's pointers.
	assumed := *pod
	assumed.Spec.NodeName = res.Node
	s.cache.assume(&assumed)
	s.queue.scheduled(qp)
	s.goWrite(ctx, func() { s.bind(ctx, &assumed, res) })
	return true
}

// goWrite runs an API write on its own goroutine, waiting for a free slot
// first so that a slow API server slows the loop down instead of piling up
// goroutines.
func (s *sched) goWrite(ctx context.Context, fn func()) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		// Still run it: callers count on fn's clean-up (forgetting an
		// assumed pod); it fails fast on the cancelled context.
		fn()
		return
	}
	s.wg.Go(func() {
		defer func() { <-s.sem }()
		fn()
	})
}

// bind writes the binding; on failure the assumed room is given back and
// the pod retried after its back-off.
func (s *sched) bind(ctx context.Context, pod *v1.Pod, res *algorithm.Result) {
	b := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, Target: v1.ObjectReference{Kind: "Node", Name: res.Node}}
	err := s.cfg.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
	if err == nil {
		s.recorder.Eventf(pod, v1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s %s", pod.Namespace, pod.Name, res.Node, res.Explain())
		return
	}
	s.cache.forget(pod.UID)
	if ctx.Err() != nil {
		return
	}
	s.log.Warn("binding failed", "pod", pod.Namespace+"/"+pod.Name, "node", res.Node, "err", err)
	s.recorder.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Binding rejected: %v", err)
	// The room it held is free again for pods waiting for some.
	s.queue.event(evPodGone)
	if apierrors.IsNotFound(err) {
		return
	}
	if cur, err := s.pods.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == pod.UID && s.pending(cur) {
		s.queue.failed(cur.UID, cur)
	}
}

// failed handles a pod no node took: preemption, the event, the
// condition, and back to the queue.
func (s *sched) failed(ctx context.Context, qp *queuedPod, pod *v1.Pod, alg *algorithm.Algorithm, err error) {
	var fe *algorithm.FitError
	if !errors.As(err, &fe) {
		s.log.Error("scheduling failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		s.recorder.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "%v", err)
		s.queue.failed(pod.UID, nil)
		return
	}
	var nominate *string
	if alg.Profile().Preemption && fe.NumAllNodes > 0 {
		p := alg.Preempt(pod, s.snap, &fe.Diagnosis, s.listPDBs())
		switch {
		case p.Node != "":
			nominate = &p.Node
			s.preempt(ctx, pod, p)
		case !p.Ineligible:
			// No candidate: a nomination from an earlier preemption is
			// stale.
			fe.Diagnosis.PostFilterMsg = p.Message
			if pod.Status.NominatedNodeName != "" {
				nominate = new(string)
			}
		default:
			fe.Diagnosis.PostFilterMsg = p.Message
		}
	}
	msg := fe.Error()
	s.recorder.Event(pod, v1.EventTypeWarning, "FailedScheduling", msg)
	s.queue.unschedulable(qp, fe.Diagnosis.UnschedulablePlugins, nominate)
	s.status.set(pod, statusWant{
		cond:      &v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: msg},
		nominated: nominate,
	})
}

func (s *sched) listPDBs() []*policyv1.PodDisruptionBudget {
	pdbs, err := s.pdbs.List(labels.Everything())
	if err != nil {
		s.log.Warn("listing pod disruption budgets", "err", err)
	}
	return pdbs
}

// preempt evicts the victims and takes the node's room from pods nominated
// there with lower priority than the preemptor.
func (s *sched) preempt(ctx context.Context, preemptor *v1.Pod, p *algorithm.Preemption) {
	s.log.Info("preempting", "pod", preemptor.Namespace+"/"+preemptor.Name, "node", p.Node, "victims", len(p.Victims), "pdbViolations", p.PDBViolations)
	for _, low := range s.queue.lowerNominated(p.Node, priorityOf(preemptor)) {
		s.queue.clearNomination(low.UID)
		s.status.set(low, statusWant{nominated: new(string)})
	}
	for _, victim := range p.Victims {
		s.goWrite(ctx, func() {
			if err := s.evict(ctx, preemptor, victim, p.Node); err != nil && ctx.Err() == nil {
				s.log.Warn("preemption failed", "victim", victim.Namespace+"/"+victim.Name, "err", err)
			}
		})
	}
}

// evict marks the victim with a DisruptionTarget condition (so its owner
// knows why it goes) and deletes it gracefully.
func (s *sched) evict(ctx context.Context, preemptor, victim *v1.Pod, node string) error {
	pods := s.cfg.Client.CoreV1().Pods(victim.Namespace)
	cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler,
		Message: fmt.Sprintf("%s: preempting to accommodate a higher priority pod", preemptor.Spec.SchedulerName)}
	cur := victim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			var err error
			if cur, err = pods.Get(ctx, victim.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if cur.UID != victim.UID {
				return apierrors.NewNotFound(v1.Resource("pods"), victim.Name)
			}
		}
		updated := cur.DeepCopy()
		cur = nil
		if !setCondition(&updated.Status, cond) {
			return nil
		}
		_, err := pods.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s/%s as preempted: %w", victim.Namespace, victim.Name, err)
	}
	uid := victim.UID
	if err := pods.Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("delete %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	s.recorder.Eventf(victim, v1.EventTypeNormal, "Preempted", "Preempted by pod %s on node %s", preemptor.UID, node)
	return nil
}
