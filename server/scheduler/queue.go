package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"

	"skiff/server/scheduler/algorithm"
)

// clusterEvent is a change that may let unschedulable pods fit.
type clusterEvent int

const (
	// evNodeAdd: a node was added.
	evNodeAdd clusterEvent = iota
	// evNodeUpdate: a node's labels, taints, allocatable or
	// schedulability changed.
	evNodeUpdate
	// evPodGone: a bound pod was deleted or finished, freeing room.
	evPodGone
	// evPodAssigned: a pod was bound or a bound pod's labels changed,
	// which inter-pod affinity and topology spread care about.
	evPodAssigned
	numEvents
)

// relevant says whether ev may help a pod that the plugins rejected.
func relevant(ev clusterEvent, plugins sets.Set[string]) bool {
	switch ev {
	case evPodGone:
		return plugins.HasAny(algorithm.NodeResourcesFit, algorithm.NodePorts, algorithm.InterPodAffinity, algorithm.PodTopologySpread)
	case evPodAssigned:
		return plugins.HasAny(algorithm.InterPodAffinity, algorithm.PodTopologySpread)
	}
	return true
}

type podPhase int

const (
	phaseActive podPhase = iota
	phaseBackoff
	phaseUnschedulable
	phaseInFlight
)

// queuedPod is a pending pod the queue holds.
type queuedPod struct {
	pod   *v1.Pod
	phase podPhase
	// timestamp orders pods of equal priority: when the pod last entered
	// the active queue.
	timestamp    time.Time
	index        int
	backoffUntil time.Time
	plugins      sets.Set[string]
	// popSeq is the event sequence number when the pod was popped, to
	// tell which events it missed while being scheduled.
	popSeq    uint64
	unschedAt time.Time
	attempts  int
}

func priorityOf(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

type activeHeap []*queuedPod

func (h activeHeap) Len() int { return len(h) }
func (h activeHeap) Less(i, j int) bool {
	pi, pj := priorityOf(h[i].pod), priorityOf(h[j].pod)
	if pi != pj {
		return pi > pj
	}
	return h[i].timestamp.Before(h[j].timestamp)
}
func (h activeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *activeHeap) Push(x any) {
	qp := x.(*queuedPod)
	qp.index = len(*h)
	*h = append(*h, qp)
}
func (h *activeHeap) Pop() any {
	old := *h
	qp := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	qp.index = -1
	return qp
}

// maxUnschedulable is how long a pod waits for a relevant event before it
// is retried anyway, in case the event was missed (upstream's 5 minutes).
const maxUnschedulable = 5 * time.Minute

// queue orders pending pods by priority then arrival. Pods that did not
// fit wait, unschedulable, for an event that may help them, then back off
// exponentially per pod; the back-off delays are a rate-limited workqueue.
type queue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	active  activeHeap
	pods    map[types.UID]*queuedPod
	limiter workqueue.TypedRateLimiter[types.UID]
	delayed workqueue.TypedRateLimitingInterface[types.UID]
	// seq numbers events; lastEvent is the seq of each kind's latest.
	seq       uint64
	lastEvent [numEvents]uint64
	// interested counts unschedulable pods an evPodAssigned may help, so
	// the flood of binding events costs nothing when there are none.
	interested int
	closed     bool
	// nominated are pods preemption made room for, by node.
	nominated map[string]map[types.UID]*algorithm.PodInfo
	nominee   map[types.UID]string
	now       func() time.Time
}

func newQueue(initial, maxBackoff time.Duration) *queue {
	lim := workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](initial, maxBackoff)
	q := &queue{
		pods:      map[types.UID]*queuedPod{},
		limiter:   lim,
		delayed:   workqueue.NewTypedRateLimitingQueueWithConfig(lim, workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "scheduler-backoff"}),
		nominated: map[string]map[types.UID]*algorithm.PodInfo{},
		nominee:   map[types.UID]string{},
		now:       time.Now,
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// run moves pods whose back-off ended to the active queue and retries
// pods left unschedulable too long, until ctx ends.
func (q *queue) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		q.close()
	}()
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				q.flushStale()
			}
		}
	}()
	for {
		uid, quit := q.delayed.Get()
		if quit {
			return
		}
		q.mu.Lock()
		if qp := q.pods[uid]; qp != nil && qp.phase == phaseBackoff {
			q.activate(qp)
		}
		q.mu.Unlock()
		q.delayed.Done(uid)
	}
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	q.delayed.ShutDown()
}

// activate puts qp in the active heap; callers hold mu.
func (q *queue) activate(qp *queuedPod) {
	q.leaveUnschedulable(qp)
	qp.phase = phaseActive
	qp.timestamp = q.now()
	heap.Push(&q.active, qp)
	q.cond.Signal()
}

func (q *queue) leaveUnschedulable(qp *queuedPod) {
	if qp.phase == phaseUnschedulable && relevant(evPodAssigned, qp.plugins) {
		q.interested--
	}
}

// add queues a new pending pod, or updates one already queued.
func (q *queue) add(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nominateLocked(pod.UID, pod, pod.Status.NominatedNodeName)
	if qp := q.pods[pod.UID]; qp != nil {
		q.updateLocked(qp, pod)
		return
	}
	qp := &queuedPod{pod: pod}
	q.pods[pod.UID] = qp
	q.activate(qp)
}

// update takes a newer version of a pending pod. An unschedulable pod the
// user changed is retried (after its back-off): the change may fix it.
func (q *queue) update(old, pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if old.Status.NominatedNodeName != pod.Status.NominatedNodeName {
		q.nominateLocked(pod.UID, pod, pod.Status.NominatedNodeName)
	}
	qp := q.pods[pod.UID]
	if qp == nil {
		qp = &queuedPod{pod: pod}
		q.pods[pod.UID] = qp
		q.activate(qp)
		return
	}
	q.updateLocked(qp, pod)
}

func (q *queue) updateLocked(qp *queuedPod, pod *v1.Pod) {
	old := qp.pod
	qp.pod = pod
	switch qp.phase {
	case phaseActive:
		heap.Fix(&q.active, qp.index)
	case phaseUnschedulable:
		if specChanged(old, pod) {
			q.requeueLocked(qp)
		}
	}
}

// specChanged ignores what the scheduler itself writes (status) and
// bookkeeping that changes on every write.
func specChanged(a, b *v1.Pod) bool {
	strip := func(p *v1.Pod) *v1.Pod {
		c := p.DeepCopy()
		c.ResourceVersion, c.Generation, c.ManagedFields, c.Status = "", 0, nil, v1.PodStatus{}
		return c
	}
	return !equality.Semantic.DeepEqual(strip(a), strip(b))
}

// remove drops a pod that was deleted, bound elsewhere or scheduled.
func (q *queue) remove(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(uid)
}

func (q *queue) removeLocked(uid types.UID) {
	q.nominateLocked(uid, nil, "")
	qp := q.pods[uid]
	if qp == nil {
		return
	}
	delete(q.pods, uid)
	q.leaveUnschedulable(qp)
	if qp.phase == phaseActive {
		heap.Remove(&q.active, qp.index)
	}
	q.limiter.Forget(uid)
}

// pop waits for the most important active pod; false once closed.
func (q *queue) pop() (*queuedPod, *v1.Pod, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.active) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, nil, false
	}
	qp := heap.Pop(&q.active).(*queuedPod)
	qp.phase = phaseInFlight
	qp.popSeq = q.seq
	qp.attempts++
	return qp, qp.pod, true
}

// scheduled removes a pod placed on a node.
func (q *queue) scheduled(qp *queuedPod) {
	q.remove(qp.pod.UID)
}

// unschedulable takes back a pod that fits nowhere. It waits for an event
// the rejecting plugins care about, or backs off at once if such an event
// came while it was being scheduled. nominate, when set, is the node
// preemption made room on ("" clears the nomination, nil leaves it).
func (q *queue) unschedulable(qp *queuedPod, plugins sets.Set[string], nominate *string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pods[qp.pod.UID] != qp {
		return
	}
	if nominate != nil {
		q.nominateLocked(qp.pod.UID, qp.pod, *nominate)
	}
	qp.plugins = plugins
	qp.backoffUntil = q.now().Add(q.limiter.When(qp.pod.UID))
	for ev := range numEvents {
		if q.lastEvent[ev] > qp.popSeq && relevant(ev, plugins) {
			q.backoffLocked(qp)
			return
		}
	}
	qp.phase = phaseUnschedulable
	qp.unschedAt = q.now()
	if relevant(evPodAssigned, plugins) {
		q.interested++
	}
}

// failed takes back a pod whose attempt failed for another reason (an API
// error): it backs off and tries again.
func (q *queue) failed(uid types.UID, pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp := q.pods[uid]
	if qp == nil {
		if pod == nil {
			return
		}
		qp = &queuedPod{pod: pod}
		q.pods[uid] = qp
	} else if qp.phase == phaseActive {
		return
	}
	qp.backoffUntil = q.now().Add(q.limiter.When(uid))
	q.backoffLocked(qp)
}

func (q *queue) backoffLocked(qp *queuedPod) {
	q.leaveUnschedulable(qp)
	qp.phase = phaseBackoff
	q.delayed.AddAfter(qp.pod.UID, qp.backoffUntil.Sub(q.now()))
}

// requeueLocked retries an unschedulable pod once its back-off is over.
func (q *queue) requeueLocked(qp *queuedPod) {
	if !q.now().Before(qp.backoffUntil) {
		q.activate(qp)
		return
	}
	q.backoffLocked(qp)
}

// event records a cluster change and requeues the unschedulable pods it
// may help.
func (q *queue) event(ev clusterEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.lastEvent[ev] = q.seq
	if ev == evPodAssigned && q.interested == 0 {
		return
	}
	for _, qp := range q.pods {
		if qp.phase == phaseUnschedulable && relevant(ev, qp.plugins) {
			q.requeueLocked(qp)
		}
	}
}

func (q *queue) flushStale() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, qp := range q.pods {
		if qp.phase == phaseUnschedulable && q.now().Sub(qp.unschedAt) > maxUnschedulable {
			q.requeueLocked(qp)
		}
	}
}

// nominateLocked records (node != "") or clears the room preemption made
// for a pod.
func (q *queue) nominateLocked(uid types.UID, pod *v1.Pod, node string) {
	if old, ok := q.nominee[uid]; ok {
		delete(q.nominated[old], uid)
		if len(q.nominated[old]) == 0 {
			delete(q.nominated, old)
		}
		delete(q.nominee, uid)
	}
	if node == "" {
		return
	}
	if q.nominated[node] == nil {
		q.nominated[node] = map[types.UID]*algorithm.PodInfo{}
	}
	q.nominated[node][uid] = algorithm.NewPodInfo(pod)
	q.nominee[uid] = node
}

// nominations copies the nominated pods for a scheduling cycle.
func (q *queue) nominations() map[string][]*algorithm.PodInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.nominated) == 0 {
		return nil
	}
	out := make(map[string][]*algorithm.PodInfo, len(q.nominated))
	for node, pods := range q.nominated {
		for _, pi := range pods {
			out[node] = append(out[node], pi)
		}
	}
	return out
}

// lowerNominated lists pods nominated to node with priority below prio:
// preemption for a more important pod takes their room.
func (q *queue) lowerNominated(node string, prio int32) []*v1.Pod {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*v1.Pod
	for _, pi := range q.nominated[node] {
		if pi.Priority < prio {
			out = append(out, pi.Pod)
		}
	}
	return out
}

func (q *queue) clearNomination(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nominateLocked(uid, nil, "")
}

// counts reports pods per phase (for tests and logs).
func (q *queue) counts() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, qp := range q.pods {
		switch qp.phase {
		case phaseActive:
			active++
		case phaseBackoff:
			backoff++
		case phaseUnschedulable:
			unschedulable++
		}
	}
	return
}
