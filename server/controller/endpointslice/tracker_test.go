package endpointslice

import (
	"testing"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func sliceAt(uid, rv string) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), ResourceVersion: rv}}
}

func TestTracker_Staleness(t *testing.T) {
	const svc = "default/web"
	tests := []struct {
		name   string
		setup  func(*tracker)
		cached []*discovery.EndpointSlice
		stale  bool
	}{
		{"nothing written", func(*tracker) {}, []*discovery.EndpointSlice{sliceAt("a", "5")}, false},
		{"written and seen", func(tr *tracker) { tr.recordWrite(svc, sliceAt("a", "10")) }, []*discovery.EndpointSlice{sliceAt("a", "10")}, false},
		{"written, cache has an older version", func(tr *tracker) { tr.recordWrite(svc, sliceAt("a", "10")) }, []*discovery.EndpointSlice{sliceAt("a", "9")}, true},
		{"created, not in the cache yet", func(tr *tracker) { tr.recordWrite(svc, sliceAt("a", "10")) }, nil, true},
		{"changed by someone else since", func(tr *tracker) { tr.recordWrite(svc, sliceAt("a", "10")) }, []*discovery.EndpointSlice{sliceAt("a", "12")}, false},
		{"deleted, still cached", func(tr *tracker) { tr.recordDelete(svc, sliceAt("a", "10")) }, []*discovery.EndpointSlice{sliceAt("a", "10")}, true},
		{"deleted and gone", func(tr *tracker) { tr.recordDelete(svc, sliceAt("a", "10")) }, nil, false},
		{"unparsable version is never stale", func(tr *tracker) { tr.recordWrite(svc, sliceAt("a", "10")) }, []*discovery.EndpointSlice{sliceAt("a", "x")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker()
			tt.setup(tr)
			if got := tr.stale(svc, tt.cached); got != tt.stale {
				t.Errorf("stale = %v, want %v", got, tt.stale)
			}
		})
	}
}

func TestTracker_EchoesOfOwnWrites(t *testing.T) {
	const svc = "default/web"
	tr := newTracker()
	tr.recordWrite(svc, sliceAt("a", "10"))
	if !tr.ownEcho(svc, sliceAt("a", "10")) {
		t.Error("own write not recognised")
	}
	if tr.ownEcho(svc, sliceAt("a", "11")) {
		t.Error("a later change by someone else taken for an own write")
	}
	if tr.ownEcho(svc, sliceAt("b", "3")) {
		t.Error("unknown slice taken for an own write")
	}
	tr.recordDelete(svc, sliceAt("a", "10"))
	if !tr.ownDeletion(svc, sliceAt("a", "10")) {
		t.Error("own deletion not recognised")
	}
	if tr.ownDeletion(svc, sliceAt("a", "10")) {
		t.Error("deletion recognised twice")
	}
}
