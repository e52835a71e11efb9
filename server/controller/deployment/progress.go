package deployment

import (
	"context"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// calculateStatus sums the ReplicaSets' statuses and sets the Available
// condition.
func calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	available := sumStatus(allRSs, statusAvailable)
	terminating := sumStatus(allRSs, statusTerminating)
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumStatus(allRSs, statusReplicas),
		UpdatedReplicas:     sumStatus([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sumStatus(allRSs, statusReady),
		AvailableReplicas:   available,
		UnavailableReplicas: max(specReplicas(allRSs)-available, 0),
		TerminatingReplicas: &terminating,
		CollisionCount:      d.Status.CollisionCount,
		Conditions:          append([]appsv1.DeploymentCondition(nil), d.Status.Conditions...),
	}
	if available >= replicas(d.Spec.Replicas)-maxUnavailable(d) {
		setCondition(&st, newDeploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable, "Deployment has minimum availability."))
	} else {
		setCondition(&st, newDeploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable, "Deployment does not have minimum availability."))
	}
	return st
}

// deploymentComplete: every replica runs the current template and is
// available, and the status describes the current spec.
func deploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	r := replicas(d.Spec.Replicas)
	return st.UpdatedReplicas == r && st.Replicas == r && st.AvailableReplicas == r && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing: the new status is a step further than the
// stored one: more updated, ready or available pods, or fewer old ones.
func deploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut: no progress recorded for progressDeadlineSeconds.
func deploymentTimedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	cond := getCondition(st, appsv1.DeploymentProgressing)
	switch {
	case cond == nil || cond.Reason == reasonNewRSAvailable:
		return false
	case cond.Reason == reasonTimedOut:
		return true
	}
	return cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

// syncRolloutStatus writes the status with the Progressing condition
// brought up to date: complete, progressing (its lastUpdateTime moves on,
// restarting the deadline), or timed out; and the first ReplicaFailure
// condition of the ReplicaSets, the new one's first.
func (c *controller) syncRolloutStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	st := calculateStatus(allRSs, newRS, d)
	if !hasProgressDeadline(d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := getCondition(&d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == reasonNewRSAvailable
	if hasProgressDeadline(d) && !complete {
		subject := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case deploymentComplete(d, &st):
			setCondition(&st, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable, subject+" has successfully progressed."))
		case deploymentProgressing(d, &st):
			cond := newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonRSUpdated, subject+" is progressing.")
			// Unlike other conditions, this one is rewritten with the same
			// reason: its lastUpdateTime marks the latest progress.
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&st, appsv1.DeploymentProgressing)
			}
			setCondition(&st, cond)
		case deploymentTimedOut(d, &st, c.now()):
			setCondition(&st, newDeploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut, subject+" has timed out progressing."))
		}
	}
	if failure, ok := replicaFailure(allRSs, newRS); ok {
		setCondition(&st, failure)
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	if reflect.DeepEqual(d.Status, st) {
		c.requeueStuck(d, &st)
		return nil
	}
	d.Status = st
	_, err := c.updateStatus(ctx, d)
	return err
}

// replicaFailure turns the first ReplicaFailure condition of the
// ReplicaSets, the new one's preferably, into the Deployment's.
func replicaFailure(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (appsv1.DeploymentCondition, bool) {
	ordered := append([]*appsv1.ReplicaSet{newRS}, allRSs...)
	for _, rs := range ordered {
		if rs == nil {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				return appsv1.DeploymentCondition{
					Type: appsv1.DeploymentReplicaFailure, Status: c.Status, Reason: c.Reason, Message: c.Message,
					LastUpdateTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime,
				}, true
			}
		}
	}
	return appsv1.DeploymentCondition{}, false
}

// requeueStuck looks at a rollout again when its deadline passes: nothing
// else would wake it, since a stuck rollout changes nothing.
func (c *controller) requeueStuck(d *appsv1.Deployment, st *appsv1.DeploymentStatus) {
	cur := getCondition(&d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil || deploymentComplete(d, st) || cur.Reason == reasonTimedOut {
		return
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(c.now())
	if after < time.Second {
		c.queue.EnqueueAfter(d, time.Second)
		return
	}
	c.queue.EnqueueAfter(d, after+time.Second)
}
