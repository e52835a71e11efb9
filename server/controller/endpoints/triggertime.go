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

// compute records the pods' current trigger times and returns the earliest
// that changed since the previous call for the service (the service's
// creation on the first call); zero when nothing identifiable changed.
func (t *triggerTimes) compute(key string, svc *corev1.Service, pods []*corev1.Pod) time.Time {
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
		st = &seenState{}
		t.seen[key] = st
		consider(svc.CreationTimestamp.Time)
	}
	now := make(map[string]time.Time, len(pods))
	for _, pod := range pods {
		ts := podTriggerTime(pod)
		now[pod.Name] = ts
		if prev, ok := st.pods[pod.Name]; !ok || !prev.Equal(ts) {
			consider(ts)
		}
	}
	st.pods = now
	return earliest
}

func (t *triggerTimes) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, key)
}
