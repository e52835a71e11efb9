package replicaset

import (
	"sync"
	"time"
)

// expectationsTTL bounds how long a sync waits for creations or deletions
// it asked for: a watch event lost for good must not wedge a ReplicaSet
// forever (upstream's value).
const expectationsTTL = 5 * time.Minute

// expectations remember, per ReplicaSet, the pod creations and deletions
// a sync has asked for and the informer has not shown yet. Until they have
// all been seen, the pod cache is behind what this controller did, and
// acting on it would create or delete the same pods twice.
type expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

type expectation struct {
	adds int
	// deleting holds the keys of the pods whose deletion is awaited; a
	// pod seen terminating and then gone counts once, not twice.
	deleting map[string]bool
	at       time.Time
}

func newExpectations() *expectations {
	return &expectations{m: map[string]*expectation{}, now: time.Now}
}

// satisfied reports whether the ReplicaSet may be acted on: nothing is
// awaited, or what is awaited has been awaited too long.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	if !ok {
		return true
	}
	if x.adds <= 0 && len(x.deleting) == 0 {
		return true
	}
	return e.now().Sub(x.at) > expectationsTTL
}

func (e *expectations) expectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{adds: n, at: e.now()}
}

func (e *expectations) expectDeletions(key string, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := &expectation{deleting: make(map[string]bool, len(podKeys)), at: e.now()}
	for _, k := range podKeys {
		x.deleting[k] = true
	}
	e.m[key] = x
}

func (e *expectations) creationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		x.adds--
	}
}

func (e *expectations) deletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		delete(x.deleting, podKey)
	}
}

func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
