// Package controllertest is the harness of the controllers' tests: a real
// API server (apitest) with a client and an informer factory over it, a
// controller running in the background for the length of a test, an event
// recorder to assert on, and polling with a deadline. Fakes cannot tell
// whether the server really behaves as a controller assumes; this can.
package controllertest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"skiff/server/apiserver/apitest"
)

// Options adjust Start.
type Options struct {
	// API adjusts the server (admission, authentication).
	API apitest.Options
	// Namespaces are created before Start returns.
	Namespaces []string
	// Timeout bounds the test's context, so that a controller that hangs
	// fails the test instead of stalling it (no bound when zero).
	Timeout time.Duration
}

// Env is an API server for one test, and what a controller needs to run
// against it.
type Env struct {
	// Ctx ends when the test does, or at the timeout.
	Ctx context.Context
	// Config reaches the server as the controller manager does, for the
	// clients other than Client (metadata, discovery).
	Config *rest.Config
	Client kubernetes.Interface
	// Informers is a factory shut down when the test ends, after the
	// controllers started by Run.
	Informers informers.SharedInformerFactory
	// Events is a recorder to hand a controller under test.
	Events *Recorder
}

// Start starts an API server that stops when the test ends.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	cfg := apitest.Start(t, opts.API).Config(nil)
	client := kubernetes.NewForConfigOrDie(cfg)
	var ctx context.Context
	var cancel context.CancelFunc
	if opts.Timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), opts.Timeout)
	} else {
		ctx, cancel = context.WithCancel(context.Background())
	}
	t.Cleanup(cancel)
	for _, ns := range opts.Namespaces {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return &Env{Ctx: ctx, Config: cfg, Client: client, Informers: Informers(t, client), Events: &Recorder{}}
}

// Informers is a factory over client that is shut down when the test
// ends. Registered before Run, its cleanup runs after the controllers
// have stopped.
func Informers(t testing.TB, client kubernetes.Interface) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactory(client, 0)
	t.Cleanup(f.Shutdown)
	return f
}

// Run runs a controller in the background until the test ends, then
// cancels run's context, waits for it to return and fails the test if it
// returned an error: a controller must stop cleanly. stop does the same
// sooner, and may be called again.
func Run(t testing.TB, ctx context.Context, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Logger writes to the test's output from level up.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// APIRecorder records events to the API server as component does, for
// tests that read them back as kubectl would. It stops when the test
// ends; made before Run, it outlives the controllers.
func APIRecorder(t testing.TB, client kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}

// Eventually polls cond until it holds, and fails the test if it still
// does not after timeout or when ctx ends, or at once if cond fails. The
// failure message is "waiting for " and the formatted rest; the arguments
// are formatted then, so a Stringer shows the state at the deadline.
//
// It polls every 10ms: the server is in-process, so a look is cheap, and
// a test goes on as soon as the controller is done.
func Eventually(t testing.TB, ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc, format string, args ...any) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", fmt.Sprintf(format, args...), err)
	}
}

// Event is one event a Recorder was given.
type Event struct {
	// Object is the name of the object the event is about.
	Object, Type, Reason, Message string
}

// String reads as kubectl describe lists events: "type reason message".
func (e Event) String() string { return e.Type + " " + e.Reason + " " + e.Message }

// Recorder is an EventRecorder that keeps the events for assertions.
// Unlike record.FakeRecorder, it never blocks a controller when the test
// does not read them.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Event records an event about obj.
func (r *Recorder) Event(obj runtime.Object, eventType, reason, message string) {
	name := ""
	if acc, err := meta.Accessor(obj); err == nil {
		name = acc.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Object: name, Type: eventType, Reason: reason, Message: message})
}

// Eventf records an event with a formatted message.
func (r *Recorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf records an event, leaving out the annotations.
func (r *Recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Eventf(obj, eventType, reason, format, args...)
}

// Events are the events so far, oldest first.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// WithReason are the events so far with this reason, oldest first.
func (r *Recorder) WithReason(reason string) []Event {
	var out []Event
	for _, e := range r.Events() {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// Has reports whether an event so far reads (as String) starting with
// prefix: an exact reason with the start of a message that ends in
// generated names.
func (r *Recorder) Has(prefix string) bool {
	for _, e := range r.Events() {
		if strings.HasPrefix(e.String(), prefix) {
			return true
		}
	}
	return false
}

// String lists the events so far, for failure messages.
func (r *Recorder) String() string { return fmt.Sprint(r.Events()) }
