package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"skiff/server/podcondition"
)

// statusWant is what the scheduler wants a pending pod's status to say.
type statusWant struct {
	namespace, name string
	// cond, when set, is the PodScheduled condition to write.
	cond *v1.PodCondition
	// nominated, when set, is the nominatedNodeName ("" clears it).
	nominated *string
	version   uint64
}

// statusWriter writes pod statuses off the scheduling loop. The workqueue
// never runs two writes of one pod at once and retries failures with
// back-off; a newer wish for a pod replaces an older one not yet written.
type statusWriter struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	log    *slog.Logger
	q      workqueue.TypedRateLimitingInterface[types.UID]
	mu     sync.Mutex
	want   map[types.UID]statusWant
	seq    uint64
}

func newStatusWriter(client kubernetes.Interface, pods corelisters.PodLister, log *slog.Logger) *statusWriter {
	return &statusWriter{
		client: client, pods: pods, log: log,
		q:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](), workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "scheduler-status"}),
		want: map[types.UID]statusWant{},
	}
}

// set asks for pod's status to be updated; fields left nil in w keep a
// previous wish's value.
func (s *statusWriter) set(pod *v1.Pod, w statusWant) {
	s.mu.Lock()
	prev, ok := s.want[pod.UID]
	if ok {
		if w.cond == nil {
			w.cond = prev.cond
		}
		if w.nominated == nil {
			w.nominated = prev.nominated
		}
	}
	s.seq++
	w.namespace, w.name, w.version = pod.Namespace, pod.Name, s.seq
	s.want[pod.UID] = w
	s.mu.Unlock()
	s.q.Add(pod.UID)
}

func (s *statusWriter) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				uid, quit := s.q.Get()
				if quit {
					return
				}
				if err := s.write(ctx, uid); err != nil && ctx.Err() == nil {
					s.log.Warn("pod status update failed", "uid", uid, "err", err)
					s.q.AddRateLimited(uid)
				} else {
					s.q.Forget(uid)
				}
				s.q.Done(uid)
			}
		})
	}
	<-ctx.Done()
	s.q.ShutDown()
	wg.Wait()
}

func (s *statusWriter) write(ctx context.Context, uid types.UID) error {
	s.mu.Lock()
	w, ok := s.want[uid]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pod *v1.Pod
		var err error
		if first {
			// The informer's copy is usually current; only a conflict
			// costs a GET.
			pod, err = s.pods.Pods(w.namespace).Get(w.name)
			first = false
		} else {
			pod, err = s.client.CoreV1().Pods(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		}
		if err != nil || pod.UID != uid || pod.Spec.NodeName != "" {
			return ignoreNotFound(err)
		}
		updated := pod.DeepCopy()
		if !applyStatus(&updated.Status, w) {
			return nil
		}
		_, err = s.client.CoreV1().Pods(w.namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
	if err = ignoreNotFound(err); err != nil {
		return fmt.Errorf("update status of %s/%s: %w", w.namespace, w.name, err)
	}
	s.mu.Lock()
	if cur, ok := s.want[uid]; ok && cur.version == w.version {
		delete(s.want, uid)
	}
	s.mu.Unlock()
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// applyStatus reports whether anything changed: an identical condition is
// not rewritten on every retry of an unschedulable pod.
func applyStatus(st *v1.PodStatus, w statusWant) bool {
	changed := false
	if w.nominated != nil && st.NominatedNodeName != *w.nominated {
		st.NominatedNodeName = *w.nominated
		changed = true
	}
	if w.cond != nil && setCondition(st, *w.cond) {
		changed = true
	}
	return changed
}

// setCondition sets cond, keeping the transition time unless the status
// flips.
func setCondition(st *v1.PodStatus, cond v1.PodCondition) bool {
	return podcondition.Set(st, cond, metav1.Now())
}
