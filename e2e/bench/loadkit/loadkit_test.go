package loadkit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

func TestPct_WhenSorted_GivesNearestRank(t *testing.T) {
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty is zero", nil, 0.5, 0},
		{"p50 of 100", s, 0.5, 50 * time.Millisecond},
		{"p99 of 100", s, 0.99, 99 * time.Millisecond},
		{"p100 is the max", s, 1, 100 * time.Millisecond},
		{"p0 is the min", s, 0, time.Millisecond},
		{"one value", s[:1], 0.99, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pct(tc.in, tc.p); got != tc.want {
				t.Fatalf("Pct(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarize_WhenErrors_RateCountsSuccessesOnly(t *testing.T) {
	lat := []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	st := Summarize(lat, 1, 2*time.Second)
	if st.Count != 4 || st.Errors != 1 || st.PerSec != 1.5 || st.P50ms != 2 || st.MaxMs != 4 {
		t.Fatalf("Summarize = %+v, want count 4, 1 error, 1.5/s, p50 2ms, max 4ms", st)
	}
	if lat[0] != 3*time.Millisecond {
		t.Fatal("Summarize sorted its input in place")
	}
}

func TestMedian_WhenEvenCount_TakesUpperMiddle(t *testing.T) {
	if got := Median([]time.Duration{4, 1, 3, 2}); got != 3 {
		t.Fatalf("Median = %v, want 3", got)
	}
	if got := Median(nil); got != 0 {
		t.Fatalf("Median(nil) = %v, want 0", got)
	}
}

func TestRun_WhenOpsSucceedAndFail_CallsEachIndexOnceAndReportsFirstErrors(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	workers := map[int]bool{}
	var reported atomic.Int64
	st := Run(context.Background(), 4, 10, 30, func(_ context.Context, w, i int) error {
		mu.Lock()
		seen[i]++
		workers[w] = true
		mu.Unlock()
		if i%2 == 0 {
			return fmt.Errorf("op %d: %w", i, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("boom")))
		}
		return nil
	}, func(string, ...any) { reported.Add(1) })
	if len(seen) != 20 {
		t.Fatalf("%d distinct indexes called, want 20", len(seen))
	}
	for i, n := range seen {
		if i < 10 || i >= 30 || n != 1 {
			t.Fatalf("index %d called %d times; want each of [10,30) once", i, n)
		}
	}
	for w := range workers {
		if w < 0 || w >= 4 {
			t.Fatalf("worker index %d out of [0,4)", w)
		}
	}
	if st.Count != 20 || st.Errors != 10 {
		t.Fatalf("stats %+v, want 20 calls and 10 errors", st)
	}
	if reported.Load() != ReportedErrors {
		t.Fatalf("%d errors reported, want the first %d", reported.Load(), ReportedErrors)
	}
}

func TestRun_WhenContextEnds_StopsAndCountsOnlyCallsMade(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	st := Run(ctx, 2, 0, 1000, func(context.Context, int, int) error {
		if calls.Add(1) == 10 {
			cancel()
		}
		return nil
	}, func(string, ...any) {})
	if n := calls.Load(); int64(st.Count) != n || n >= 1000 {
		t.Fatalf("stats count %d, calls %d; want them equal and fewer than 1000", st.Count, n)
	}
}

func TestDescribe_WhenAPIStatus_AddsCodeAndReason(t *testing.T) {
	err := fmt.Errorf("create: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no")))
	got := Describe(err)
	if want := "code=403 reason=Forbidden"; !strings.Contains(got, want) {
		t.Fatalf("Describe = %q, want it to hold %q", got, want)
	}
	if got := Describe(errors.New("plain")); got != "plain" {
		t.Fatalf("Describe(plain) = %q", got)
	}
}

func TestClientsConfig_WhenUsed_CountsWireAndHasOwnDialAndNoRateLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	wire := NewWire()
	for _, tc := range []struct {
		name     string
		protobuf bool
		accept   string
	}{{"json", false, "application/json"}, {"protobuf", true, ProtobufType + ",application/json"}} {
		t.Run(tc.name, func(t *testing.T) {
			cc := Clients{Base: &rest.Config{Host: srv.URL}, Protobuf: tc.protobuf, Wire: wire}.Config(5 * time.Second)
			if cc.QPS >= 0 || cc.RateLimiter != nil || cc.Dial == nil || cc.AcceptContentTypes != tc.accept {
				t.Fatalf("config QPS=%v limiter=%v dial set=%v accept=%q", cc.QPS, cc.RateLimiter, cc.Dial != nil, cc.AcceptContentTypes)
			}
			hc, err := rest.HTTPClientFor(cc)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/x", nil)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	got := wire.Snapshot()
	if got["POST->201 json"] != 2 || got["sent json"] != 2 {
		t.Fatalf("wire counts %v, want 2 POST->201 json and 2 sent json", got)
	}
	if l := wire.Line(); !strings.Contains(l, "POST->201 json=2") {
		t.Fatalf("wire line %q", l)
	}
}

func TestLoadAvg_OnLinux_GivesThreeFields(t *testing.T) {
	var a, b, c float64
	if n, err := fmt.Sscanf(LoadAvg(), "%f %f %f", &a, &b, &c); err != nil || n != 3 {
		t.Fatalf("LoadAvg() = %q: %v", LoadAvg(), err)
	}
}
