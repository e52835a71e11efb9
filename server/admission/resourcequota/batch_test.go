package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/apiserver"
	"skiff/server/quota"
)

// bound is how long a test waits for a step before it fails.
const bound = 10 * time.Second

// gates block chosen calls of the fake (by call number) until opened, so
// a test can hold a batch in flight while others queue behind it.
type gates map[int]*gate

type gate struct {
	entered, open chan struct{}
	once          sync.Once
}

func newGates(t *testing.T, calls ...int) gates {
	g := gates{}
	for _, n := range calls {
		g[n] = &gate{entered: make(chan struct{}), open: make(chan struct{})}
	}
	t.Cleanup(func() { // a failed test must not leave calls blocked
		for n := range g {
			g.release(n)
		}
	})
	return g
}

func (g gates) hook(n int) {
	if x := g[n]; x != nil {
		close(x.entered)
		<-x.open
	}
}

func (g gates) release(n int) { g[n].once.Do(func() { close(g[n].open) }) }

func (g gates) waitEntered(t *testing.T, n int) {
	t.Helper()
	select {
	case <-g[n].entered:
	case <-time.After(bound):
		t.Fatalf("call %d never came", n)
	}
}

// waitQueued waits until n requests queue behind the namespace's leader.
func waitQueued(t *testing.T, p *Plugin, n int) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for queuedIn(p, "ns") != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", queuedIn(p, "ns"), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func queuedIn(p *Plugin, ns string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.queues[ns]; q != nil {
		return len(q.waiting)
	}
	return 0
}

func admitAsync(p *Plugin, ctx context.Context, pod *corev1.Pod) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- p.Admit(ctx, create(podsRes, pod)) }()
	return ch
}

func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(bound):
		t.Fatal("admission never returned")
		return nil
	}
}

// While the first request of a namespace is held in its quota read, the
// rest queue; they are then checked as one batch and written once, and
// the quota is still never overshot.
func TestAdmit_ConcurrentCreates_WhenQueued_BatchOneWrite(t *testing.T) {
	cases := []struct {
		name         string
		hard         string
		requests     int
		wantAdmitted int
	}{
		{"more requests than room", "5", 20, 5},
		{"room for all", "50", 20, 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(measured("q", rl("pods", c.hard), rl("pods", "0")))
			g := newGates(t, 1)
			f.onList = g.hook
			p := plugin(f)
			results := make([]<-chan error, c.requests)
			results[0] = admitAsync(p, context.Background(), newPod("p0", nil, nil))
			g.waitEntered(t, 1)
			for i := 1; i < c.requests; i++ {
				results[i] = admitAsync(p, context.Background(), newPod(fmt.Sprintf("p%d", i), nil, nil))
			}
			waitQueued(t, p, c.requests-1)
			g.release(1)
			admitted := 0
			for _, ch := range results {
				switch err := result(t, ch); {
				case err == nil:
					admitted++
				case !apierrors.IsForbidden(err):
					t.Errorf("unexpected error: %v", err)
				}
			}
			t.Logf("%d requests, %d admitted, %d status writes", c.requests, admitted, f.writes)
			if admitted != c.wantAdmitted {
				t.Errorf("admitted %d, want %d", admitted, c.wantAdmitted)
			}
			if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", fmt.Sprint(c.wantAdmitted))) {
				t.Errorf("used %s, want pods=%d", quota.PrettyPrint(got), c.wantAdmitted)
			}
			// One write for the leader alone, one for the batch behind it.
			if f.writes != 2 || f.writes >= admitted {
				t.Errorf("%d status writes for %d admitted, want 2", f.writes, admitted)
			}
			if n := len(p.queues); n != 0 {
				t.Errorf("%d namespace queues left", n)
			}
		})
	}
}

// evaluateBatch runs one batch directly, in order, and returns each
// request's result.
func evaluateBatch(p *Plugin, as ...apiserver.AdmissionAttributes) []error {
	p.mu.Lock()
	p.init()
	p.mu.Unlock()
	batch := make([]*work, len(as))
	for i, a := range as {
		batch[i] = newWork(a, p.Evaluators.For(a.Resource.GVR().GroupResource()), nil)
	}
	p.evaluate(context.Background(), "ns", batch)
	errs := make([]error, len(batch))
	for i, w := range batch {
		errs[i] = w.err
	}
	return errs
}

func dryRun(a apiserver.AdmissionAttributes) apiserver.AdmissionAttributes {
	a.DryRun = true
	return a
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEvaluate_Batch_ChecksInOrderAgainstRunningUsage(t *testing.T) {
	cases := []struct {
		name       string
		quotas     []*corev1.ResourceQuota
		requests   []apiserver.AdmissionAttributes
		want       []string // "" admits
		wantUsed   map[string]corev1.ResourceList
		wantWrites int
	}{
		{
			name:   "a refused request in the middle charges nothing",
			quotas: []*corev1.ResourceQuota{measured("q", rl("pods", "10", "requests.cpu", "1"), rl("pods", "0", "requests.cpu", "0"))},
			requests: []apiserver.AdmissionAttributes{
				create(podsRes, newPod("a", rl("cpu", "300m"), nil)),
				create(podsRes, newPod("big", rl("cpu", "2"), nil)),
				create(podsRes, newPod("b", rl("cpu", "300m"), nil)),
			},
			want:       []string{"", `pods "big" is forbidden: exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=300m, limited: requests.cpu=1`, ""},
			wantUsed:   map[string]corev1.ResourceList{"q": rl("pods", "2", "requests.cpu", "600m")},
			wantWrites: 1,
		},
		{
			name:   "each request sees what the earlier ones added",
			quotas: []*corev1.ResourceQuota{measured("q", rl("pods", "2"), rl("pods", "0"))},
			requests: []apiserver.AdmissionAttributes{
				create(podsRes, newPod("a", nil, nil)),
				create(podsRes, newPod("b", nil, nil)),
				create(podsRes, newPod("c", nil, nil)),
			},
			want:       []string{"", "", `pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`},
			wantUsed:   map[string]corev1.ResourceList{"q": rl("pods", "2")},
			wantWrites: 1,
		},
		{
			name:   "dry runs are checked against the batch but add nothing",
			quotas: []*corev1.ResourceQuota{measured("q", rl("pods", "2"), rl("pods", "0"))},
			requests: []apiserver.AdmissionAttributes{
				create(podsRes, newPod("a", nil, nil)),
				dryRun(create(podsRes, newPod("dry1", nil, nil))),
				create(podsRes, newPod("b", nil, nil)),
				dryRun(create(podsRes, newPod("dry2", nil, nil))),
			},
			want:       []string{"", "", "", `pods "dry2" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`},
			wantUsed:   map[string]corev1.ResourceList{"q": rl("pods", "2")},
			wantWrites: 1,
		},
		{
			name:   "only dry runs write nothing",
			quotas: []*corev1.ResourceQuota{measured("q", rl("pods", "2"), rl("pods", "0"))},
			requests: []apiserver.AdmissionAttributes{
				dryRun(create(podsRes, newPod("a", nil, nil))),
				dryRun(create(podsRes, newPod("b", nil, nil))),
			},
			want:     []string{"", ""},
			wantUsed: map[string]corev1.ResourceList{"q": rl("pods", "0")},
		},
		{
			name: "every changed quota is written once for the batch",
			quotas: []*corev1.ResourceQuota{
				measured("all", rl("pods", "10"), rl("pods", "0")),
				measured("cpu", rl("requests.cpu", "1"), rl("requests.cpu", "0")),
				measured("secrets", rl("secrets", "10"), rl("secrets", "0")),
			},
			requests: []apiserver.AdmissionAttributes{
				create(podsRes, newPod("a", rl("cpu", "400m"), nil)),
				create(podsRes, newPod("b", rl("cpu", "400m"), nil)),
				create(podsRes, newPod("c", rl("cpu", "400m"), nil)),
			},
			want: []string{"", "", `pods "c" is forbidden: exceeded quota: cpu, requested: requests.cpu=400m, used: requests.cpu=800m, limited: requests.cpu=1`},
			wantUsed: map[string]corev1.ResourceList{
				"all": rl("pods", "2"), "cpu": rl("requests.cpu", "800m"), "secrets": rl("secrets", "0"),
			},
			wantWrites: 2,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c.quotas...)
			errs := evaluateBatch(plugin(f), c.requests...)
			for i, err := range errs {
				if got := errText(err); got != c.want[i] {
					t.Errorf("request %d: got %q, want %q", i, got, c.want[i])
				}
				if err != nil && !apierrors.IsForbidden(err) {
					t.Errorf("request %d: %v is not forbidden", i, err)
				}
			}
			for name, want := range c.wantUsed {
				if got := f.get(name).Status.Used; !quota.Equals(got, want) {
					t.Errorf("%s used %s, want %s", name, quota.PrettyPrint(got), quota.PrettyPrint(want))
				}
			}
			if f.writes != c.wantWrites {
				t.Errorf("%d status writes, want %d", f.writes, c.wantWrites)
			}
		})
	}
}

// A write that loses a race to another writer (here the controller
// recalculating) re-reads the quota and checks the batch again against it.
func TestEvaluate_Conflict_RechecksBatch(t *testing.T) {
	f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
	f.onUpdate = func(n int) {
		if n == 1 {
			recalculated := f.get("q")
			recalculated.Status.Used = rl("pods", "3")
			f.put(recalculated)
		}
	}
	var as []apiserver.AdmissionAttributes
	for i := range 4 {
		as = append(as, create(podsRes, newPod(fmt.Sprintf("p%d", i), nil, nil)))
	}
	errs := evaluateBatch(plugin(f), as...)
	want := []string{"", "",
		`pods "p2" is forbidden: exceeded quota: q, requested: pods=1, used: pods=5, limited: pods=5`,
		`pods "p3" is forbidden: exceeded quota: q, requested: pods=1, used: pods=5, limited: pods=5`}
	for i, err := range errs {
		if got := errText(err); got != want[i] {
			t.Errorf("request %d: got %q, want %q", i, got, want[i])
		}
	}
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "5")) {
		t.Errorf("used %s, want pods=5", quota.PrettyPrint(got))
	}
	if f.updates != 2 || f.writes != 1 {
		t.Errorf("%d status writes tried, %d done; want 2 and 1", f.updates, f.writes)
	}
}

// When only one of two quotas loses the race, the other stays charged and
// only the loser is checked again; a request refused then holds a charge
// on the quota already written, which Release gives back.
func TestEvaluate_ConflictOnOneQuota_RechecksOnlyIt(t *testing.T) {
	f := newFake(measured("a", rl("pods", "10"), rl("pods", "0")), measured("b", rl("pods", "3"), rl("pods", "0")))
	f.onUpdate = func(int) {
		f.mu.Lock()
		first := f.quotas["b"].ResourceVersion == "2"
		f.mu.Unlock()
		if first { // b was written by someone else meanwhile
			recalculated := f.get("b")
			recalculated.Status.Used = rl("pods", "2")
			f.put(recalculated)
		}
	}
	p := plugin(f)
	var as []apiserver.AdmissionAttributes
	for i := range 3 {
		as = append(as, create(podsRes, newPod(fmt.Sprintf("p%d", i), nil, nil)))
	}
	errs := evaluateBatch(p, as...)
	if errs[0] != nil || !apierrors.IsForbidden(errs[1]) || !apierrors.IsForbidden(errs[2]) {
		t.Fatalf("got %v, want the first admitted and the rest refused by b", errs)
	}
	if got := f.get("b").Status.Used; !quota.Equals(got, rl("pods", "3")) {
		t.Errorf("b used %s, want pods=3", quota.PrettyPrint(got))
	}
	if got := f.get("a").Status.Used; !quota.Equals(got, rl("pods", "3")) {
		t.Errorf("a used %s, want pods=3 before the refused requests are released", quota.PrettyPrint(got))
	}
	for _, a := range as[1:] {
		p.Release(context.Background(), podsRes, a.Object, nil)
	}
	if got := f.get("a").Status.Used; !quota.Equals(got, rl("pods", "1")) {
		t.Errorf("a used %s after release, want pods=1", quota.PrettyPrint(got))
	}
}

func TestEvaluate_ConflictsBeyondRetries_FailWithConflict(t *testing.T) {
	f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
	f.onUpdate = func(int) { f.put(f.get("q")) } // someone always writes first
	errs := evaluateBatch(plugin(f), create(podsRes, newPod("a", nil, nil)), create(podsRes, newPod("b", nil, nil)))
	for i, err := range errs {
		if !apierrors.IsConflict(err) {
			t.Errorf("request %d: got %v, want a conflict", i, err)
		}
	}
	if f.updates != conflictRetries+1 || f.writes != 0 {
		t.Errorf("%d status writes tried, %d done; want %d and 0", f.updates, f.writes, conflictRetries+1)
	}
}

func TestRelease_OneOfABatch_GivesBackOnlyItsCharge(t *testing.T) {
	f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
	p := plugin(f)
	pods := []*corev1.Pod{newPod("a", nil, nil), newPod("b", nil, nil), newPod("c", nil, nil)}
	errs := evaluateBatch(p, create(podsRes, pods[0]), create(podsRes, pods[1]), create(podsRes, pods[2]))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	p.Release(context.Background(), podsRes, pods[1], nil)
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "2")) {
		t.Errorf("used %s, want pods=2", quota.PrettyPrint(got))
	}
}

// A request that gives up while queued leaves the queue and is never
// charged; the batch in flight is unaffected.
func TestAdmit_WaiterGivesUp_LeavesQueue(t *testing.T) {
	cases := []struct {
		name    string
		wait    time.Duration
		giveUp  func(cancel context.CancelFunc)
		wantErr func(error) bool
	}{
		{"cancelled", time.Hour, func(cancel context.CancelFunc) { cancel() },
			func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"wait limit", 20 * time.Millisecond, func(context.CancelFunc) {},
			func(err error) bool {
				return apierrors.IsInternalError(err) && errText(err) == "Internal error occurred: resource quota evaluation timed out"
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
			g := newGates(t, 1)
			f.onList = g.hook
			p := plugin(f)
			p.wait = c.wait
			leader := admitAsync(p, context.Background(), newPod("leader", nil, nil))
			g.waitEntered(t, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waiter := admitAsync(p, ctx, newPod("waiter", nil, nil))
			waitQueued(t, p, 1)
			c.giveUp(cancel)
			if err := result(t, waiter); !c.wantErr(err) {
				t.Errorf("waiter got %v", err)
			}
			if n := queuedIn(p, "ns"); n != 0 {
				t.Errorf("%d still queued", n)
			}
			g.release(1)
			if err := result(t, leader); err != nil {
				t.Errorf("leader: %v", err)
			}
			if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "1")) {
				t.Errorf("used %s, want pods=1", quota.PrettyPrint(got))
			}
			if n := len(p.queues); n != 0 {
				t.Errorf("%d namespace queues left", n)
			}
		})
	}
}

// Once in a batch, a request waits for the batch's result even if its
// client goes away, and a leader whose client goes away still carries its
// batch: the others' results must not depend on one client.
func TestAdmit_CancelledInsideBatch_GetsBatchResult(t *testing.T) {
	f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
	g := newGates(t, 1, 2)
	f.onList = g.hook
	p := plugin(f)
	leader := admitAsync(p, context.Background(), newPod("leader", nil, nil))
	g.waitEntered(t, 1)
	nextCtx, cancelNext := context.WithCancel(context.Background())
	defer cancelNext()
	next := admitAsync(p, nextCtx, newPod("next", nil, nil))
	waitQueued(t, p, 1)
	carriedCtx, cancelCarried := context.WithCancel(context.Background())
	defer cancelCarried()
	carried := admitAsync(p, carriedCtx, newPod("carried", nil, nil))
	waitQueued(t, p, 2)
	g.release(1)
	// next now leads a batch of itself and carried, held in its read.
	g.waitEntered(t, 2)
	cancelCarried()
	cancelNext()
	g.release(2)
	for name, ch := range map[string]<-chan error{"leader": leader, "next": next, "carried": carried} {
		if err := result(t, ch); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "3")) {
		t.Errorf("used %s, want pods=3", quota.PrettyPrint(got))
	}
}

// A request made leader just as it gives up passes the lead on, so the
// requests behind it are not stranded.
func TestAwait_MadeLeaderWhileGivingUp_HandsOff(t *testing.T) {
	p := plugin(newFake())
	p.init()
	w, behind := newWork(apiserver.AdmissionAttributes{}, nil, nil), newWork(apiserver.AdmissionAttributes{}, nil, nil)
	w.state = leading
	p.queues["ns"] = &nsQueue{waiting: []*work{behind}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.await(ctx, "ns", w); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want cancelled", err)
	}
	if behind.state != leading || len(behind.lead) != 1 || queuedIn(p, "ns") != 0 {
		t.Errorf("the request behind was not made leader (state %d, %d signals)", behind.state, len(behind.lead))
	}
}
