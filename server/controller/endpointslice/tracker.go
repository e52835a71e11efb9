package endpointslice

import (
	"strconv"
	"sync"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// tracker remembers the slices this controller last wrote, so that it can
// tell its own writes coming back through the informer (nothing to do)
// from changes made by others (resync the service), and can tell when the
// informer cache has not caught up with its writes yet: planning from a
// stale cache would create duplicate slices, since new slices get
// generated names and the server cannot reject the second create.
//
// Upstream compares metadata.generation; resourceVersions are compared
// here instead because they move on every write whatever the server does
// with generation. They are integers on this server; a version that does
// not parse is treated as unknown, never as stale.
type tracker struct {
	mu sync.Mutex
	// written maps a service key to the resourceVersion of each slice the
	// controller wrote, by UID; deleted marks slices it deleted.
	written map[string]map[types.UID]uint64
}

const deleted = 0

func newTracker() *tracker { return &tracker{written: map[string]map[types.UID]uint64{}} }

func rv(s *discovery.EndpointSlice) (uint64, bool) {
	v, err := strconv.ParseUint(s.ResourceVersion, 10, 64)
	return v, err == nil && v != deleted
}

func (t *tracker) recordWrite(svcKey string, s *discovery.EndpointSlice) {
	v, ok := rv(s)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.written[svcKey]
	if m == nil {
		m = map[types.UID]uint64{}
		t.written[svcKey] = m
	}
	m[s.UID] = v
}

func (t *tracker) recordDelete(svcKey string, s *discovery.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.written[svcKey]
	if m == nil {
		m = map[types.UID]uint64{}
		t.written[svcKey] = m
	}
	m[s.UID] = deleted
}

// ownEcho reports whether an added or updated slice is one of this
// controller's writes (or older), which needs no sync.
func (t *tracker) ownEcho(svcKey string, s *discovery.EndpointSlice) bool {
	v, ok := rv(s)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	want, found := t.written[svcKey][s.UID]
	return found && want != deleted && v <= want
}

// ownDeletion reports whether a deleted slice was deleted by this
// controller, and forgets it either way.
func (t *tracker) ownDeletion(svcKey string, s *discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.written[svcKey]
	want, found := m[s.UID]
	delete(m, s.UID)
	return found && want == deleted
}

// stale reports whether the cached slices of a service miss one of the
// controller's writes.
func (t *tracker) stale(svcKey string, cached []*discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.written[svcKey]
	if len(m) == 0 {
		return false
	}
	seen := make(map[types.UID]*discovery.EndpointSlice, len(cached))
	for _, s := range cached {
		seen[s.UID] = s
	}
	for uid, want := range m {
		s, ok := seen[uid]
		switch {
		case want == deleted:
			if ok {
				return true
			}
		case !ok:
			return true
		default:
			if v, parsed := rv(s); parsed && v < want {
				return true
			}
		}
	}
	return false
}

func (t *tracker) forget(svcKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.written, svcKey)
}
