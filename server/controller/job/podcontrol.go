package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// apiParallelism bounds concurrent pod writes of one sync.
const apiParallelism = 16

// each runs f on every pod, a few at a time, and joins the errors.
func each(pods []*corev1.Pod, f func(i int, p *corev1.Pod) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, apiParallelism)
	)
	for i, p := range pods {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i, p); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createPods creates n pods (with the given indexes for Indexed jobs) in
// batches of 1, 2, 4... stopping at the first batch with a failure: when
// one create fails (quota, admission) the rest would likely fail alike,
// and each failure is an event.
func (c *controller) createPods(ctx context.Context, s *state, n int, indexes []int) (int32, error) {
	key, job := s.key, s.job
	c.exp.expectCreations(key, n)
	var created atomic.Int32
	var errs []error
	for done, size := 0, 1; done < n; size *= 2 {
		size = min(size, n-done)
		batch := make([]*corev1.Pod, size)
		for i := range batch {
			ix := noIndex
			if indexes != nil {
				ix = indexes[done+i]
			}
			batch[i] = newPod(job, ix)
			if ix != noIndex && hasBackoffLimitPerIndex(job) {
				annotateIndexFailures(batch[i], job, s.delayed[ix])
			}
		}
		err := each(batch, func(_ int, p *corev1.Pod) error {
			if err := c.createPod(ctx, job, p); err != nil {
				c.exp.creationObserved(key)
				return err
			}
			created.Add(1)
			return nil
		})
		done += size
		if err != nil {
			errs = append(errs, err)
			for range n - done {
				c.exp.creationObserved(key)
			}
			break
		}
	}
	return created.Load(), errors.Join(errs...)
}

func (c *controller) createPod(ctx context.Context, job *batchv1.Job, p *corev1.Pod) error {
	got, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// Every create will fail from now on; nothing to report.
			return err
		}
		c.recorder.Eventf(job, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return fmt.Errorf("create pod: %w", err)
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", got.Name)
	return nil
}

// deletePods removes pods the job no longer wants (suspended, too many):
// their finalizer goes first, so that they are not counted as failures.
// It returns how many were deleted and how many of those were ready.
func (c *controller) deletePods(ctx context.Context, s *state, pods []*corev1.Pod) (ready, deleted int32, err error) {
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.exp.expectDeletions(s.key, uids)
	var nReady, nDeleted atomic.Int32
	err = each(pods, func(_ int, p *corev1.Pod) error {
		err := c.patchOutFinalizer(ctx, p)
		if err == nil {
			err = c.removePod(ctx, s.job, p)
		}
		if err != nil {
			c.exp.deletionObserved(s.key, p.UID)
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		nDeleted.Add(1)
		if isReady(p) {
			nReady.Add(1)
		}
		return nil
	})
	return nReady.Load(), nDeleted.Load(), err
}

// deleteActive stops the pods of a job that has met its end, keeping
// their finalizer: trackStatus counts them, then releases them.
func (c *controller) deleteActive(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (ready, deleted int32, err error) {
	var nReady, nDeleted atomic.Int32
	err = each(pods, func(_ int, p *corev1.Pod) error {
		if err := c.removePod(ctx, job, p); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		nDeleted.Add(1)
		if isReady(p) {
			nReady.Add(1)
		}
		return nil
	})
	return nReady.Load(), nDeleted.Load(), err
}

func (c *controller) removePod(ctx context.Context, job *batchv1.Job, p *corev1.Pod) error {
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return err
	case err != nil:
		c.recorder.Eventf(job, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", p.Name)
	return nil
}

// removeFinalizers releases counted pods; ok[i] says whether pods[i] no
// longer holds the finalizer (a pod already gone counts).
func (c *controller) removeFinalizers(ctx context.Context, key string, pods []*corev1.Pod) (ok []bool, err error) {
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.exp.expectFinalizersRemoved(key, uids)
	ok = make([]bool, len(pods))
	err = each(pods, func(i int, p *corev1.Pod) error {
		if err := c.patchOutFinalizer(ctx, p); err != nil {
			// No update will show the removal: stop waiting for one.
			c.exp.finalizerRemovalObserved(key, p.UID)
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		ok[i] = true
		return nil
	})
	return ok, err
}

func (c *controller) patchOutFinalizer(ctx context.Context, p *corev1.Pod) error {
	if !hasTrackingFinalizer(p) {
		return nil
	}
	_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, removeFinalizerPatch(), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer of pod %s: %w", p.Name, err)
	}
	return err
}

// claimPods returns the pods the job controls, adopting orphans its
// selector matches and releasing pods it controls that no longer match,
// as upstream's ControllerRefManager does.
func (c *controller) claimPods(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("job selector: %w", err)
	}
	all, err := c.pods.Pods(job.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out, orphans []*corev1.Pod
	var errs []error
	for _, p := range all {
		ref := metav1.GetControllerOf(p)
		matches := !sel.Empty() && sel.Matches(labels.Set(p.Labels))
		switch {
		case ref != nil && ref.UID == job.UID && matches:
			out = append(out, p)
		case ref != nil && ref.UID == job.UID:
			if job.DeletionTimestamp == nil {
				errs = append(errs, c.release(ctx, job, p))
			}
		case ref == nil && matches && p.DeletionTimestamp == nil && job.DeletionTimestamp == nil:
			orphans = append(orphans, p)
		}
	}
	if len(orphans) > 0 {
		adopted, err := c.adopt(ctx, job, orphans)
		out = append(out, adopted...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// adopt makes orphans the job's, with the tracking finalizer. The job is
// read afresh first: a job being deleted must not take pods with it.
func (c *controller) adopt(ctx context.Context, job *batchv1.Job, orphans []*corev1.Pod) ([]*corev1.Pod, error) {
	fresh, err := c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("recheck job before adopting: %w", err)
	}
	if fresh.UID != job.UID || fresh.DeletionTimestamp != nil {
		return nil, nil
	}
	ref := metav1.NewControllerRef(job, jobKind)
	var mu sync.Mutex
	var out []*corev1.Pod
	err = each(orphans, func(_ int, p *corev1.Pod) error {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid":             p.UID,
			"ownerReferences": []metav1.OwnerReference{*ref},
			"finalizers":      []string{batchv1.JobTrackingFinalizer},
		}})
		if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("adopt pod %s: %w", p.Name, err)
		}
		cp := p.DeepCopy()
		cp.OwnerReferences = append(cp.OwnerReferences, *ref)
		if !slices.Contains(cp.Finalizers, batchv1.JobTrackingFinalizer) {
			cp.Finalizers = append(cp.Finalizers, batchv1.JobTrackingFinalizer)
		}
		mu.Lock()
		out = append(out, cp)
		mu.Unlock()
		return nil
	})
	return out, err
}

// release drops the job's reference from a pod it no longer selects; the
// orphan worker then removes the finalizer.
func (c *controller) release(ctx context.Context, job *batchv1.Job, p *corev1.Pod) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":             p.UID,
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": job.UID}},
	}})
	_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release pod %s: %w", p.Name, err)
	}
	return nil
}
