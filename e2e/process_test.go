package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a skiff process started in its own process group, so that the
// whole group can be killed if a test fails half-way.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv starts skiff with extra environment variables ("K=V").
//
// A server started here runs in the machine's own network namespace, so it
// never runs its local node (which would program bridges, routes and
// nftables there): multi-node tests use the namespace lab in
// cluster_test.go instead.
func startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	if len(args) > 0 && args[0] == "server" && !slices.Contains(args, "--disable-agent") {
		args = append(args, "--disable-agent")
	}
	p := &proc{cmd: exec.Command(skiffBin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("skiff %v output:\n%s", args, p.output())
		}
	})
	return p
}

// stop sends sig and waits for the exit, returning its error.
func (p *proc) stop(t *testing.T, sig syscall.Signal, within time.Duration) error {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		t.Fatalf("skiff did not exit within %v of %v", within, sig)
		return nil
	}
}

// wait waits for the process to exit by itself.
func (p *proc) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		t.Fatalf("skiff did not exit within %v", within)
		return nil
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitHealthy polls /healthz until it answers "ok" or the process exits.
func waitHealthy(t *testing.T, p *proc, port int) {
	t.Helper()
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		body, code, err := get(ctx, url)
		if err == nil && code == 200 && body == "ok" {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("skiff exited before it was healthy: %v", p.err)
		case <-ctx.Done():
			t.Fatalf("%s not ok within 60s: %d %q %v", url, code, body, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// insecureClient only polls health endpoints, which anyone may read; tests
// that exercise the API verify the server's certificate through kubectl.
var insecureClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func get(ctx context.Context, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

func exitCode(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Sprint(ee.ExitCode())
	}
	return fmt.Sprint(err)
}
