package loadbalancer

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLB_ActiveBackendStops_NewConnectionsReachAnother(t *testing.T) {
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	lb, _ := runLB(t, Config{Initial: a.addr(), HealthInterval: time.Hour})
	lb.Update([]string{a.addr(), b.addr(), c.addr()})

	held, err := connect(lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if held.name != "a" {
		t.Fatalf("first connection reached %q, want the initial server a", held.name)
	}

	stopped := time.Now()
	a.stop()
	var got *greeted
	for time.Since(stopped) < 10*time.Second {
		if g, err := connect(lb.Addr()); err == nil {
			got = g
			break
		}
	}
	if got == nil {
		t.Fatal("no connection through the balancer reached a server within 10 s of a's death")
	}
	defer got.Close()
	t.Logf("new connections reach %s %v after the active server stopped", got.name, time.Since(stopped))
	if got.name != "b" {
		t.Errorf("failover reached %q, want b (the next in list order)", got.name)
	}
	if err := got.echoes(); err != nil {
		t.Errorf("the failed-over connection does not carry data: %v", err)
	}
	if lb.Active() != b.addr() {
		t.Errorf("active = %s, want b %s", lb.Active(), b.addr())
	}
	// Sticky: later connections stay on b.
	for range 3 {
		g, err := connect(lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		g.Close()
		if g.name != "b" {
			t.Errorf("a later connection reached %q, want b (sticky)", g.name)
		}
	}
	if err := held.waitClosed(); err != nil {
		t.Errorf("the connection held to the dead server: %v", err)
	}
}

// A server that stops answering health checks while its TCP connections
// stay open (a partitioned or hung host) has its connections cut, so the
// clients come back through the balancer to a live server.
func TestLB_ActiveMarkedDown_CutsItsConnections(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	var mu sync.Mutex
	sick := map[string]bool{}
	check := func(ctx context.Context, addr string) error {
		mu.Lock()
		defer mu.Unlock()
		if sick[addr] {
			return errors.New("readyz: 503")
		}
		return nil
	}
	lb, _ := runLB(t, Config{Initial: a.addr(), HealthInterval: 20 * time.Millisecond, Check: check})
	lb.Update([]string{a.addr(), b.addr()})

	var onA []*greeted
	for range 3 {
		g, err := connect(lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if g.name != "a" {
			t.Fatalf("connection reached %q, want a", g.name)
		}
		onA = append(onA, g)
	}
	marked := time.Now()
	mu.Lock()
	sick[a.addr()] = true
	mu.Unlock()
	for i, g := range onA {
		if err := g.waitClosed(); err != nil {
			t.Errorf("connection %d to the server marked down: %v", i, err)
		}
	}
	t.Logf("connections to the server marked down cut %v after its check started failing", time.Since(marked))
	if !eventually(5*time.Second, func() bool { return a.conns() == 0 }) {
		t.Errorf("backend a still holds %d connections from the balancer", a.conns())
	}
	g, err := connect(lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.name != "b" {
		t.Errorf("a new connection reached %q, want b", g.name)
	}
	// a recovering does not move the balancer back (sticky), nor cut b.
	mu.Lock()
	sick[a.addr()] = false
	mu.Unlock()
	time.Sleep(100 * time.Millisecond) // several health rounds
	if err := g.echoes(); err != nil {
		t.Errorf("the connection to b after a recovered: %v", err)
	}
	if lb.Active() != b.addr() {
		t.Errorf("active = %s after a recovered, want b (sticky)", lb.Active())
	}
}

func TestLB_StateFile_PersistedAndReloadedWhenInitialIsDead(t *testing.T) {
	dir := t.TempDir()
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	lb, stop := runLB(t, Config{DataDir: dir, Initial: a.addr(), HealthInterval: time.Hour})
	lb.Update([]string{b.addr(), c.addr()})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, "agent", "etc", "skiff-agent-load-balancer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("state file %s is not JSON: %v", data, err)
	}
	if want := []string{b.addr(), c.addr()}; !slices.Equal(st.Servers, want) || st.Initial != a.addr() {
		t.Errorf("state file = %+v, want servers %v initial %s", st, want, a.addr())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "agent", "etc", ".*tmp*")); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}

	a.stop() // the restarted agent's --server is dead
	lb2, _ := runLB(t, Config{DataDir: dir, Initial: a.addr(), HealthInterval: time.Hour})
	if want := []string{b.addr(), c.addr(), a.addr()}; !slices.Equal(lb2.Servers(), want) {
		t.Errorf("reloaded servers = %v, want %v", lb2.Servers(), want)
	}
	g, err := connect(lb2.Addr())
	if err != nil {
		t.Fatalf("through the restarted balancer with its --server dead: %v", err)
	}
	defer g.Close()
	if g.name != "b" {
		t.Errorf("reached %q, want b (first of the reloaded list)", g.name)
	}
}

func TestLB_StateFile_CorruptIsIgnoredWithALogLine(t *testing.T) {
	for name, content := range map[string]string{
		"not json":     "{\"servers\": [\"10.0.0.1:6443\"",
		"wrong type":   `{"servers": "10.0.0.1:6443"}`,
		"binary noise": "\x00\x01\x02\xff",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := StatePath(dir, DefaultName)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			a := startBackend(t, "a")
			log, buf := newLogger(t)
			lb, _ := runLB(t, Config{DataDir: dir, Initial: a.addr(), Logger: log, HealthInterval: time.Hour})
			if want := []string{a.addr()}; !slices.Equal(lb.Servers(), want) {
				t.Errorf("servers = %v, want only the initial %v", lb.Servers(), want)
			}
			if !strings.Contains(buf.String(), "corrupt server list state file") {
				t.Errorf("no log line about the corrupt state file:\n%s", buf.String())
			}
			// The next update rewrites it whole.
			lb.Update([]string{"10.0.0.2:6443"})
			data, _ := os.ReadFile(path)
			var st state
			if err := json.Unmarshal(data, &st); err != nil || !slices.Equal(st.Servers, []string{"10.0.0.2:6443"}) {
				t.Errorf("state file after an update = %q (%v)", data, err)
			}
		})
	}
}

func TestLB_Update_NormalizesTheList(t *testing.T) {
	const initial = "a.example:6443"
	tests := []struct {
		name    string
		updates [][]string
		want    []string
	}{
		{"duplicates and empties dropped, initial appended", [][]string{{"10.0.0.2:6443", "", " ", "10.0.0.2:6443", " 10.0.0.3:6443 "}},
			[]string{"10.0.0.2:6443", "10.0.0.3:6443", initial}},
		{"initial listed keeps its place", [][]string{{"10.0.0.2:6443", "A.example:6443", "10.0.0.3:6443"}},
			[]string{"10.0.0.2:6443", initial, "10.0.0.3:6443"}},
		{"malformed dropped", [][]string{{"10.0.0.2", "10.0.0.2:0", "10.0.0.2:x", ":6443", "10.0.0.2:70000", "::1:6443", "10.0.0.3:6443"}},
			[]string{"10.0.0.3:6443", initial}},
		{"IPv6 bracketed", [][]string{{"[FD00::1]:6443", "[fd00::1]:6443"}}, []string{"[fd00::1]:6443", initial}},
		{"an empty update keeps the known servers", [][]string{{"10.0.0.2:6443"}, {}, {"", "  "}},
			[]string{"10.0.0.2:6443", initial}},
		{"a later update replaces", [][]string{{"10.0.0.2:6443", "10.0.0.3:6443"}, {"10.0.0.4:6443"}},
			[]string{"10.0.0.4:6443", initial}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := newLogger(t)
			lb, err := New(Config{DataDir: t.TempDir(), Initial: initial, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lb.ln.Close() })
			for _, u := range tc.updates {
				lb.Update(u)
			}
			if got := lb.Servers(); !slices.Equal(got, tc.want) {
				t.Errorf("servers = %q, want %q", got, tc.want)
			}
			lb2, err := New(Config{DataDir: lb.cfg.DataDir, Initial: initial, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lb2.ln.Close() })
			if got := lb2.Servers(); !slices.Equal(got, tc.want) {
				t.Errorf("reloaded servers = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNew_RejectsABadInitialServer(t *testing.T) {
	for _, initial := range []string{"", "host", "host:0", "https://host:6443"} {
		if lb, err := New(Config{Initial: initial}); err == nil {
			lb.ln.Close()
			t.Errorf("New(Initial %q) succeeded", initial)
		}
	}
}

func TestLB_Update_RemovingTheActive_CutsItAndMoves(t *testing.T) {
	a, b, c := startBackend(t, "a"), startBackend(t, "b"), startBackend(t, "c")
	lb, _ := runLB(t, Config{Initial: c.addr(), HealthInterval: time.Hour})
	lb.Update([]string{a.addr(), b.addr()})
	lb.mu.Lock()
	lb.active = a.addr()
	lb.mu.Unlock()
	g, err := connect(lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.name != "a" {
		t.Fatalf("reached %q, want a", g.name)
	}
	lb.Update([]string{b.addr()})
	if err := g.waitClosed(); err != nil {
		t.Errorf("the connection to the removed server: %v", err)
	}
	if lb.Active() != b.addr() {
		t.Errorf("active = %s, want b %s", lb.Active(), b.addr())
	}
}

func TestLB_AllServersDown_DialFailsQuicklyWithErrNoServers(t *testing.T) {
	dead1, dead2, dead3 := deadAddr(t), deadAddr(t), deadAddr(t)
	lb, _ := runLB(t, Config{Initial: dead1, HealthInterval: 20 * time.Millisecond})
	lb.Update([]string{dead2, dead3})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := time.Now()
	c, err := lb.Dial(ctx)
	took := time.Since(started)
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded with every server dead")
	}
	t.Logf("Dial with every server down failed after %v: %v", took, err)
	if !errors.Is(err, ErrNoServers) {
		t.Errorf("error does not wrap ErrNoServers: %v", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Dial used up its whole context (%v) instead of failing on the refused dials", took)
	}
	for _, a := range []string{dead1, dead2, dead3} {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("error does not name %s: %v", a, err)
		}
	}

	// Through the proxy: the client's connection is closed, not held.
	if !eventually(5*time.Second, func() bool {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		return len(lb.down) == 3
	}) {
		t.Error("the health check did not mark the three servers down")
	}
	started = time.Now()
	conn, err := net.DialTimeout("tcp", lb.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the client's connection was held open 5 s with no server")
	}
	t.Logf("client connection closed %v after connecting with every server down (%v)", time.Since(started), err)
}

func TestLB_Run_EndsOnCancel_WithItsGoroutinesAndConnections(t *testing.T) {
	a := startBackend(t, "a")
	base := runtime.NumGoroutine()
	lb, stop := runLB(t, Config{Initial: a.addr(), HealthInterval: 10 * time.Millisecond})
	var held []*greeted
	for range 4 {
		g, err := connect(lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		held = append(held, g)
	}
	t.Logf("goroutines: %d before the balancer, %d with 4 proxied connections", base, runtime.NumGoroutine())
	started := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("Run returned %v after cancel", time.Since(started))
	for i, g := range held {
		if err := g.waitClosed(); err != nil {
			t.Errorf("proxied connection %d after Run returned: %v", i, err)
		}
	}
	if c, err := net.DialTimeout("tcp", lb.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the balancer still accepts connections after Run returned")
	}
	if !eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d after Run, %d before\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
	}
}
