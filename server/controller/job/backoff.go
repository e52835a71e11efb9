package job

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// backoffRecord is what the re-creation delay after pod failures is
// computed from: failures since the last success and when the last one
// happened. It lives in memory only, as upstream's does; a restart of the
// controller forgets it and the next pod is created without delay.
type backoffRecord struct {
	failuresAfterSuccess int32
	lastFailure          time.Time
}

// backoffStore holds a record per job key.
type backoffStore struct {
	mu      sync.Mutex
	records map[string]backoffRecord
}

func newBackoffStore() *backoffStore {
	return &backoffStore{records: map[string]backoffRecord{}}
}

func (s *backoffStore) get(key string) backoffRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records[key]
}

func (s *backoffStore) set(key string, r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, key)
}

// next folds newly finished pods into the record: a success resets the
// count, and only failures after the last success count.
func (r backoffRecord) next(succeeded, failed []*corev1.Pod) backoffRecord {
	byTime := func(ps []*corev1.Pod) []time.Time {
		ts := make([]time.Time, len(ps))
		for i, p := range ps {
			ts[i] = finishedTime(p)
		}
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		return ts
	}
	fails := byTime(failed)
	if len(succeeded) == 0 {
		if len(fails) == 0 {
			return r
		}
		return backoffRecord{failuresAfterSuccess: r.failuresAfterSuccess + int32(len(fails)), lastFailure: fails[len(fails)-1]}
	}
	oks := byTime(succeeded)
	lastOK := oks[len(oks)-1]
	out := backoffRecord{}
	for i := len(fails) - 1; i >= 0 && fails[i].After(lastOK); i-- {
		if out.failuresAfterSuccess == 0 {
			out.lastFailure = fails[i]
		}
		out.failuresAfterSuccess++
	}
	return out
}

// remaining is how long pod creation must still wait: base after the
// first failure, doubling with each further one up to limit.
func (r backoffRecord) remaining(now time.Time, base, limit time.Duration) time.Duration {
	if r.failuresAfterSuccess == 0 {
		return 0
	}
	d := base
	for i := int32(1); i < r.failuresAfterSuccess && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	elapsed := now.Sub(r.lastFailure)
	if elapsed >= d {
		return 0
	}
	return d - elapsed
}
