package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"

	"skiff/runtime/containers"
)

func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	h, p, _ := net.SplitHostPort(u.Host)
	n, _ := strconv.Atoi(p)
	return h, n
}

func TestHTTPGetProbe(t *testing.T) {
	var gotHost, gotHeader, gotUA string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost, gotHeader, gotUA = r.Host, r.Header.Get("X-Check"), r.UserAgent()
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(200)
		case "/redirect":
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
		case "/slow":
			time.Sleep(2 * time.Second)
		default:
			w.WriteHeader(503)
			_, _ = w.Write([]byte("down"))
		}
	}))
	defer srv.Close()
	ip, port := hostPort(t, srv.URL)
	named := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	tests := []struct {
		name    string
		path    string
		port    intstr.IntOrString
		want    Result
		wantMsg string
	}{
		{"2xx-succeeds", "/ok", intstr.FromInt32(int32(port)), Success, ""},
		{"named-port-resolves", "/ok", intstr.FromString("http"), Success, ""},
		{"3xx-succeeds-without-following", "/redirect", intstr.FromInt32(int32(port)), Success, ""},
		{"5xx-fails-with-status", "/bad", intstr.FromInt32(int32(port)), Failure, "statuscode: 503 down"},
		{"timeout-fails", "/slow", intstr.FromInt32(int32(port)), Failure, "Get "},
		{"unknown-named-port-fails", "/ok", intstr.FromString("nope"), Failure, `port "nope" not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := Action{HTTPGet: &corev1.HTTPGetAction{Path: tc.path, Port: tc.port,
				HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Check", Value: "yes"}, {Name: "Host", Value: "app.local"}}}}
			res, msg := Do(context.Background(), a, Target{PodIP: ip, Container: named}, nil, time.Second)
			if res != tc.want || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("result %s %q, want %s containing %q", res, msg, tc.want, tc.wantMsg)
			}
			if tc.want == Success && (gotHost != "app.local" || gotHeader != "yes" || !strings.HasPrefix(gotUA, "kube-probe/")) {
				t.Fatalf("request host=%q header=%q ua=%q", gotHost, gotHeader, gotUA)
			}
		})
	}
}

func TestHTTPSProbeSkipsVerification(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	ip, port := hostPort(t, srv.URL)
	a := Action{HTTPGet: &corev1.HTTPGetAction{Path: "healthz", Port: intstr.FromInt32(int32(port)), Scheme: corev1.URISchemeHTTPS}}
	if res, msg := Do(context.Background(), a, Target{PodIP: ip}, nil, time.Second); res != Success {
		t.Fatalf("https probe: %s %s", res, msg)
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	a := Action{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}
	if res, msg := Do(context.Background(), a, Target{PodIP: "127.0.0.1"}, nil, time.Second); res != Success {
		t.Fatalf("open port: %s %s", res, msg)
	}
	_ = ln.Close()
	if res, _ := Do(context.Background(), a, Target{PodIP: "127.0.0.1"}, nil, time.Second); res != Failure {
		t.Fatal("closed port succeeded")
	}
}

type fakeExec struct {
	mu    sync.Mutex
	calls [][]string
	code  atomic.Int32
	err   error
	delay time.Duration
}

func (f *fakeExec) Exec(ctx context.Context, id string, req containers.ExecRequest) (int, error) {
	f.mu.Lock()
	f.calls = append(f.calls, append([]string{id}, req.Cmd...))
	f.mu.Unlock()
	if req.Stdout != nil {
		_, _ = req.Stdout.Write([]byte("some output\n"))
	}
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	return int(f.code.Load()), f.err
}

func TestExecProbe(t *testing.T) {
	tests := []struct {
		name    string
		code    int32
		err     error
		delay   time.Duration
		want    Result
		wantMsg string
	}{
		{"exit-0-succeeds", 0, nil, 0, Success, ""},
		{"exit-1-fails-with-output", 1, nil, 0, Failure, "exited with 1: some output"},
		{"runtime-error-fails", 0, errors.New("no such task"), 0, Failure, "no such task"},
		{"timeout-fails", 0, nil, 3 * time.Second, Failure, "timed out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := &fakeExec{err: tc.err, delay: tc.delay}
			ex.code.Store(tc.code)
			a := Action{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}}
			res, msg := Do(context.Background(), a, Target{ContainerID: "c1"}, ex, 100*time.Millisecond)
			if res != tc.want || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("result %s %q", res, msg)
			}
			if strings.Join(ex.calls[0], " ") != "c1 cat /tmp/healthy" {
				t.Fatalf("exec call %v", ex.calls)
			}
		})
	}
}

func TestNoActionFails(t *testing.T) {
	if res, msg := Do(context.Background(), Action{}, Target{}, nil, time.Second); res != Failure || msg != ErrNoAction.Error() {
		t.Fatalf("%s %s", res, msg)
	}
}

type results struct {
	mu   sync.Mutex
	list []Result
	fail int
}

func (r *results) add(res Result, _ string) { r.mu.Lock(); r.list = append(r.list, res); r.mu.Unlock() }
func (r *results) failed(string)            { r.mu.Lock(); r.fail++; r.mu.Unlock() }
func (r *results) get() ([]Result, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.list...), r.fail
}

func waitUntil(t *testing.T, clk *testingclock.FakeClock, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		clk.Step(step)
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWorkerThresholdsAndInitialDelay(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	ex := &fakeExec{}
	ex.code.Store(1)
	var r results
	w := NewWorker(WorkerConfig{
		Kind: Readiness, Clock: clk, StartedAt: clk.Now(), Exec: ex, Target: Target{ContainerID: "c"},
		Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
			InitialDelaySeconds: 5, PeriodSeconds: 2, FailureThreshold: 3, SuccessThreshold: 2},
		OnResult: r.add, OnFailedAttempt: r.failed,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(20 * time.Millisecond)
	clk.Step(4 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if _, f := r.get(); f != 0 {
		t.Fatal("probed before initialDelaySeconds")
	}
	waitUntil(t, clk, 2*time.Second, func() bool { l, _ := r.get(); return len(l) == 1 })
	if l, f := r.get(); l[0] != Failure || f != 3 {
		t.Fatalf("after failures: %v (%d failed attempts), want one Failure after 3", l, f)
	}
	ex.code.Store(0)
	waitUntil(t, clk, 2*time.Second, func() bool { l, _ := r.get(); return len(l) == 2 })
	if l, _ := r.get(); l[1] != Success {
		t.Fatalf("results %v", l)
	}
}

func TestStartupWorkerStopsAfterSuccessAndGateHoldsOthers(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	ex := &fakeExec{}
	var r results
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1}
	w := NewWorker(WorkerConfig{Kind: Startup, Clock: clk, StartedAt: clk.Now(), Exec: ex, Probe: probe, OnResult: r.add})
	done := make(chan struct{})
	go func() { w.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("startup worker kept running after success")
	}
	var gated atomic.Bool
	live := NewWorker(WorkerConfig{Kind: Liveness, Clock: clk, StartedAt: clk.Now(), Exec: ex, Probe: probe,
		Gate: gated.Load, OnResult: r.add})
	ctx, cancel := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() { live.Run(ctx); close(done2) }()
	defer func() { cancel(); <-done2 }()
	ex.mu.Lock()
	before := len(ex.calls)
	ex.mu.Unlock()
	for i := 0; i < 5; i++ {
		clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	ex.mu.Lock()
	after := len(ex.calls)
	ex.mu.Unlock()
	if after != before {
		t.Fatal("gated liveness worker probed")
	}
	gated.Store(true)
	waitUntil(t, clk, time.Second, func() bool { ex.mu.Lock(); defer ex.mu.Unlock(); return len(ex.calls) > after })
}
