package worker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
)

// syncLog is a slog handler's output that workers may write to at once.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

var (
	errConflict = errors.New("conflict")
	errStale    = errors.New("stale")
)

// run starts q's workers on syncKey; the returned stop cancels them and
// waits for Run to return.
func run(t *testing.T, q *worker.Queue, workers int, syncKey func(context.Context, string) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, workers, syncKey)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRun_RetriesFailuresAndLogsThemByKind(t *testing.T) {
	out := &syncLog{}
	q := worker.New(worker.Config{
		Log:     slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Message: "widget sync", Noun: "widget",
		Quiet:        func(err error) bool { return errors.Is(err, errConflict) || errors.Is(err, errStale) },
		QuietMessage: "widget sync conflict",
	})
	var mu sync.Mutex
	calls := map[string]int{}
	// Each key fails in its own way once, then succeeds.
	fail := map[string]error{"ns/loud": errors.New("boom"), "ns/quiet": errConflict, "ns/ok": nil}
	run(t, q, 2, func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if calls[key] == 1 {
			return fail[key]
		}
		return nil
	})
	for key := range fail {
		q.Add(key)
	}
	waitUntil(t, "every key synced successfully", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["ns/loud"] == 2 && calls["ns/quiet"] == 2 && calls["ns/ok"] == 1
	})
	waitUntil(t, "the retries forgotten", func() bool { return q.NumRequeues("ns/loud") == 0 && q.NumRequeues("ns/quiet") == 0 })
	logs := out.String()
	for _, want := range []string{
		`level=WARN msg="widget sync" widget=ns/loud err=boom`,
		`level=DEBUG msg="widget sync conflict" widget=ns/quiet err=conflict`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Count(logs, "\n") != 2 {
		t.Errorf("want exactly the two failures logged:\n%s", logs)
	}
}

func TestRun_QuietFailuresUnloggedWithoutQuietMessage(t *testing.T) {
	out := &syncLog{}
	q := worker.New(worker.Config{
		Log:     slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Message: "widget sync", Noun: "widget",
		Quiet: func(err error) bool { return errors.Is(err, errConflict) },
	})
	var mu sync.Mutex
	calls := 0
	run(t, q, 1, func(context.Context, string) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return errConflict
		}
		return nil
	})
	q.Add("ns/a")
	waitUntil(t, "the retry", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls == 2
	})
	if logs := out.String(); logs != "" {
		t.Errorf("logged a quiet failure:\n%s", logs)
	}
}

// TestRun_StopsWithContext checks that Run waits for the sync in hand and
// neither logs nor retries the failure the cancellation causes.
func TestRun_StopsWithContext(t *testing.T) {
	out := &syncLog{}
	q := worker.New(worker.Config{Log: slog.New(slog.NewTextHandler(out, nil)), Message: "widget sync", Noun: "widget"})
	started, finished := make(chan struct{}), make(chan struct{})
	stop := run(t, q, 3, func(ctx context.Context, _ string) error {
		close(started)
		<-ctx.Done()
		close(finished)
		return ctx.Err()
	})
	q.Add("ns/a")
	<-started
	stop()
	select {
	case <-finished:
	default:
		t.Fatal("Run returned before the sync in hand finished")
	}
	if !q.ShuttingDown() {
		t.Error("queue not shut down")
	}
	if n := q.NumRequeues("ns/a"); n != 0 {
		t.Errorf("%d retries of a sync cancelled by the shutdown", n)
	}
	if logs := out.String(); logs != "" {
		t.Errorf("logged the cancellation:\n%s", logs)
	}
}

func TestEnqueue_KeysOfObjectsAndTombstones(t *testing.T) {
	q := worker.New(worker.Config{})
	defer q.ShutDown()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "live"}}
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	h := q.Handlers()
	h.OnAdd(pod, false)
	h.OnUpdate(nil, node)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: gone})
	h.OnDelete("not an object")
	var got []string
	for q.Len() > 0 {
		key, _ := q.Get()
		got = append(got, key)
		q.Done(key)
	}
	want := []string{"ns/live", "node-1", "ns/gone"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("queued %v, want %v", got, want)
	}
}

func TestUnwrap(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	if got, ok := worker.Unwrap[*corev1.Pod](pod); !ok || got != pod {
		t.Errorf("object: %v, %v", got, ok)
	}
	if got, ok := worker.Unwrap[*corev1.Pod](cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}); !ok || got != pod {
		t.Errorf("tombstone: %v, %v", got, ok)
	}
	if got, ok := worker.Unwrap[metav1.Object](cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}); !ok || got.GetName() != "p" {
		t.Errorf("tombstone as an interface: %v, %v", got, ok)
	}
	if _, ok := worker.Unwrap[*corev1.Node](cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}); ok {
		t.Error("a pod's tombstone unwrapped as a node")
	}
}

// fakeInformer counts handlers; the nil embedded informer stands for the
// methods Subscribe must not call.
type fakeInformer struct {
	cache.SharedInformer
	stopped  bool
	handlers int
}

type registration struct {
	cache.ResourceEventHandlerRegistration
}

func (registration) HasSynced() bool { return true }

func (f *fakeInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if f.stopped {
		return nil, errors.New("informer stopped")
	}
	f.handlers++
	return registration{}, nil
}

func (f *fakeInformer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	f.handlers--
	return nil
}

func TestSubscribe(t *testing.T) {
	a, b := &fakeInformer{}, &fakeInformer{}
	synced, unsubscribe, err := worker.Subscribe(
		worker.Subscription{Informer: a, Handler: cache.ResourceEventHandlerFuncs{}},
		worker.Subscription{Informer: b, Handler: cache.ResourceEventHandlerFuncs{}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || a.handlers != 1 || b.handlers != 1 {
		t.Fatalf("%d synced checks, handlers %d and %d", len(synced), a.handlers, b.handlers)
	}
	unsubscribe()
	if a.handlers != 0 || b.handlers != 0 {
		t.Errorf("handlers left after unsubscribe: %d and %d", a.handlers, b.handlers)
	}

	stopped := &fakeInformer{stopped: true}
	_, _, err = worker.Subscribe(
		worker.Subscription{Informer: a, Handler: cache.ResourceEventHandlerFuncs{}},
		worker.Subscription{Informer: stopped, Handler: cache.ResourceEventHandlerFuncs{}},
	)
	if err == nil {
		t.Fatal("subscribed to a stopped informer")
	}
	if a.handlers != 0 {
		t.Errorf("the handler added before the failure was left on its informer")
	}
}
