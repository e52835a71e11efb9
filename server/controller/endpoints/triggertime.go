package endpoints

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// triggerTimes works out the endpoints.kubernetes.io/last-change-trigger-time
// annotation: the time of the earliest change, among those not yet
// exported, that this write reflects (a pod's readiness flipping, or the
// service appearing). Consumers subtract it from the time they apply the
// change to measure end-to-end programming latency, as upstream's
// network-programming SLI does.
type triggerTimes struct {
	mu sync.Mutex
	// seen is, per service key, the trigger time each pod had when last
	// synced; a service without an entry has not been synced yet.
	seen map[string]*seenState
}

type seenState struct {
	pods map[string]time.Time
}

func newTriggerTimes() *triggerTimes { return &triggerTimes{seen: map[string]*seenState{}} }

// podTriggerTime is when the pod's readiness last changed; a pod without a
// Ready condition has not triggered anything yet.
func podTriggerTime(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// compute returns the earliest trigger time among the pods that changed
// since the last recorded state of the service (the service's creation when
// none is recorded; zero when nothing identifiable changed), and a func that
// records the pods' current times. Call it only once the Endpoints write
// succeeded: a write lost to a conflict is retried with the same trigger.
func (t *triggerTimes) compute(key string, svc *corev1.Service, pods []*corev1.Pod) (time.Time, func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, known := t.seen[key]
	var earliest time.Time
	consider := func(ts time.Time) {
		if !ts.IsZero() && (earliest.IsZero() || ts.Before(earliest)) {
			earliest = ts
		}
	}
	if !known {
		consider(svc.CreationTimestamp.Time)
	}
	now := make(map[string]time.Time, len(pods))
	for _, pod := range pods {
		ts := podTriggerTime(pod)
		now[pod.Name] = ts
		var prev time.Time
		var ok bool
		if known {
			prev, ok = st.pods[pod.Name]
		}
		if !ok || !prev.Equal(ts) {
			consider(ts)
		}
	}
	return earliest, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.seen[key] = &seenState{pods: now}
	}
}

func (t *triggerTimes) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, key)
}
