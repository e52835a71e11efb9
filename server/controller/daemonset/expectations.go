package daemonset

import (
	"sync"
	"time"
)

// expectationsTTL bounds how long a daemon set waits for the watch to show
// pods it created or deleted; a lost event must not wedge it for good.
const expectationsTTL = 5 * time.Minute

// expectations count the pod creations and deletions a daemon set issued
// that the informer has not shown yet. Until they are seen the cache is
// behind the controller's own actions, and acting on it would create a
// second pod on a node or delete a pod twice.
type expectations struct {
	mu  sync.Mutex
	m   map[string]*expectation
	now func() time.Time
}

type expectation struct {
	add, del int
	at       time.Time
}

func newExpectations() *expectations {
	return &expectations{m: map[string]*expectation{}, now: time.Now}
}

// expect records that key is about to issue add creations and del deletions.
func (e *expectations) expect(key string, add, del int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{add: add, del: del, at: e.now()}
}

// observe lowers key's expectations: an event was seen, or an action that
// was expected failed and will not produce one.
func (e *expectations) observe(key string, add, del int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		x.add -= add
		x.del -= del
	}
}

// satisfied says whether key may act on the cache again.
func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	return !ok || (x.add <= 0 && x.del <= 0) || e.now().Sub(x.at) > expectationsTTL
}

func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
