package job

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// expectationsTimeout bounds how long a job waits for the pod cache to
// show its own creations and deletions; past it the cache is trusted
// again, in case an event was lost (upstream uses the same five minutes).
const expectationsTimeout = 5 * time.Minute

// expectations remember, per job key, what this controller just did to
// pods and the informer has not shown yet. Without them a sync running on
// a cache that lags its own writes would create pods twice, or count a
// pod whose finalizer it just removed a second time.
type expectations struct {
	mu   sync.Mutex
	now  func() time.Time
	jobs map[string]*expected
}

type expected struct {
	creations int
	deletions sets.Set[types.UID]
	since     time.Time
	// finalizers are pods whose tracking finalizer was removed: they are
	// counted in status, whatever the cache still says. These never time
	// out; only seeing the pod without the finalizer (or gone) clears them.
	finalizers sets.Set[types.UID]
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, jobs: map[string]*expected{}}
}

func (e *expectations) entry(key string) *expected {
	x := e.jobs[key]
	if x == nil {
		x = &expected{deletions: sets.New[types.UID](), finalizers: sets.New[types.UID]()}
		e.jobs[key] = x
	}
	return x
}

// satisfied says whether the cache has caught up with the creations and
// deletions of the last sync.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.jobs[key]
	if x == nil || (x.creations <= 0 && x.deletions.Len() == 0) {
		return true
	}
	return e.now().Sub(x.since) > expectationsTimeout
}

func (e *expectations) expectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.entry(key)
	x.creations = n
	x.since = e.now()
}

func (e *expectations) creationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.jobs[key]; x != nil && x.creations > 0 {
		x.creations--
	}
}

func (e *expectations) expectDeletions(key string, uids []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.entry(key)
	x.deletions.Insert(uids...)
	x.since = e.now()
}

func (e *expectations) deletionObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.jobs[key]; x != nil {
		x.deletions.Delete(uid)
	}
}

func (e *expectations) expectFinalizersRemoved(key string, uids []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).finalizers.Insert(uids...)
}

func (e *expectations) finalizerRemovalObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.jobs[key]; x != nil {
		x.finalizers.Delete(uid)
	}
}

// removedFinalizers is a copy of the pods whose finalizer removal the cache
// has not shown yet.
func (e *expectations) removedFinalizers(key string) sets.Set[types.UID] {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.jobs[key]; x != nil {
		return x.finalizers.Clone()
	}
	return sets.New[types.UID]()
}

func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, key)
}
