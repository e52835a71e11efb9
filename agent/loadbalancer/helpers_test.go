package loadbalancer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// backend is a real TCP server on loopback: it greets each connection
// with its name, then echoes.
type backend struct {
	name string
	ln   net.Listener
	once sync.Once
	mu   sync.Mutex
	open map[net.Conn]struct{}
	wg   sync.WaitGroup
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, ln: ln, open: map[net.Conn]struct{}{}}
	b.wg.Go(b.accept)
	t.Cleanup(b.stop)
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }

func (b *backend) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.open[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Go(func() {
			defer func() {
				b.mu.Lock()
				delete(b.open, c)
				b.mu.Unlock()
				c.Close()
			}()
			if _, err := io.WriteString(c, b.name+"\n"); err != nil {
				return
			}
			_, _ = io.Copy(c, c)
		})
	}
}

// conns is how many connections the backend holds.
func (b *backend) conns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.open)
}

// stop kills the server: listener and connections closed, so dials to
// its address are refused.
func (b *backend) stop() {
	b.once.Do(func() {
		b.ln.Close()
		b.mu.Lock()
		for c := range b.open {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
}

// deadAddr is an address nothing listens on (a listener bound and closed).
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// greeted is a client connection through the balancer and the name of
// the backend that answered it.
type greeted struct {
	net.Conn
	r    *bufio.Reader
	name string
}

// connect dials the balancer and reads the backend's greeting (within 5 s).
func connect(addr string) (*greeted, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return &greeted{Conn: c, r: r, name: strings.TrimSpace(line)}, nil
}

// echoes reports whether the connection still carries data both ways.
func (g *greeted) echoes() error {
	g.SetDeadline(time.Now().Add(5 * time.Second))
	defer g.SetDeadline(time.Time{})
	if _, err := io.WriteString(g, "ping\n"); err != nil {
		return err
	}
	line, err := g.r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo answered " + line)
	}
	return nil
}

// waitClosed waits (up to 5 s) for the peer to close the connection and
// says how it ended: nil if closed, an error on timeout.
func (g *greeted) waitClosed() error {
	g.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := g.r.ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("connection still open after 5 s")
	}
	if err == nil {
		return errors.New("connection still carries data")
	}
	return nil
}

// logBuffer collects the balancer's logs for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger(t *testing.T) (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("balancer log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// runLB starts a balancer and returns it with a stop function that ends
// Run and returns its error; cleanup stops it too.
func runLB(t *testing.T, cfg Config) (*LB, func() error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger, _ = newLogger(t)
	}
	lb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lb.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				runErr = errors.New("Run did not return 10 s after its context ended")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return lb, stop
}

// eventually polls cond every 10 ms for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}
