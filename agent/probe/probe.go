// Package probe runs the kubelet's container checks: liveness, readiness and
// startup probes (exec, HTTP GET, TCP socket, gRPC health) and the handlers
// of lifecycle hooks, with the thresholds and timing of Kubernetes.
package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"skiff/runtime/containers"
)

// Result is the outcome of one probe or of a probe worker.
type Result int

const (
	// Unknown means no verdict yet (before the thresholds are reached).
	Unknown Result = iota
	// Success means the check passed.
	Success
	// Failure means the check failed.
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	}
	return "unknown"
}

// ErrNoAction is returned when a handler names no action at all.
var ErrNoAction = errors.New("probe names no action")

// Execer runs a command in a running container.
type Execer interface {
	// Exec runs req.Cmd in the container id and returns its exit code; ctx
	// bounds the command.
	Exec(ctx context.Context, id string, req containers.ExecRequest) (int, error)
}

// Action is one check, from a probe or a lifecycle hook handler.
type Action struct {
	Exec      *corev1.ExecAction
	HTTPGet   *corev1.HTTPGetAction
	TCPSocket *corev1.TCPSocketAction
	GRPC      *corev1.GRPCAction
	// Sleep is the lifecycle hook's sleep action.
	Sleep *corev1.SleepAction
}

// FromProbe is the action of a probe.
func FromProbe(p *corev1.Probe) Action {
	return Action{Exec: p.Exec, HTTPGet: p.HTTPGet, TCPSocket: p.TCPSocket, GRPC: p.GRPC}
}

// FromHandler is the action of a lifecycle hook.
func FromHandler(h *corev1.LifecycleHandler) Action {
	return Action{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket, Sleep: h.Sleep}
}

// Target is the container a check runs against.
type Target struct {
	// ContainerID is the runtime's ID, for exec.
	ContainerID string
	// PodIP is the default host of HTTP, TCP and gRPC checks.
	PodIP string
	// Container resolves named ports.
	Container *corev1.Container
}

// Do runs one check once, bounded by timeout, and returns its result and a
// message that says why it failed (for the Unhealthy event).
func Do(ctx context.Context, a Action, t Target, ex Execer, timeout time.Duration) (Result, string) {
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case a.Exec != nil:
		return doExec(ctx, a.Exec, t, ex, timeout)
	case a.HTTPGet != nil:
		return doHTTP(ctx, a.HTTPGet, t)
	case a.TCPSocket != nil:
		return doTCP(ctx, a.TCPSocket, t)
	case a.GRPC != nil:
		return doGRPC(ctx, a.GRPC, t)
	case a.Sleep != nil:
		select {
		case <-time.After(time.Duration(a.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return Success, ""
	}
	return Failure, ErrNoAction.Error()
}

func doExec(ctx context.Context, a *corev1.ExecAction, t Target, ex Execer, timeout time.Duration) (Result, string) {
	if ex == nil {
		return Failure, "exec probes need a runtime"
	}
	var out limitedBuffer
	code, err := ex.Exec(ctx, t.ContainerID, containers.ExecRequest{Cmd: a.Command, Stdout: &out, Stderr: &out})
	if ctx.Err() != nil {
		return Failure, fmt.Sprintf("command %q timed out after %s", strings.Join(a.Command, " "), timeout)
	}
	if err != nil {
		return Failure, fmt.Sprintf("exec %q: %v", strings.Join(a.Command, " "), err)
	}
	if code != 0 {
		msg := fmt.Sprintf("command %q exited with %d", strings.Join(a.Command, " "), code)
		if s := strings.TrimSpace(out.String()); s != "" {
			msg += ": " + s
		}
		return Failure, msg
	}
	return Success, ""
}

// limitedBuffer keeps the first 10 KiB written to it (as the kubelet does).
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 10240 - len(l.b); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		l.b = append(l.b, p[:room]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// ResolvePort turns a port number or name into a number, looking names up in
// the container's ports.
func ResolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	if c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("port %q not found in the container's ports", p.StrVal)
}

func hostOr(h string, t Target) string {
	if h != "" {
		return h
	}
	return t.PodIP
}

func doHTTP(ctx context.Context, a *corev1.HTTPGetAction, t Target) (Result, string) {
	port, err := ResolvePort(a.Port, t.Container)
	if err != nil {
		return Failure, err.Error()
	}
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := a.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(hostOr(a.Host, t), strconv.Itoa(port))}
	full := u.String() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, full, nil)
	if err != nil {
		return Failure, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	req.Header.Set("Accept", "*/*")
	for _, h := range a.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes don't verify, as upstream
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		// 3xx counts as success: don't follow redirects.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, fmt.Sprintf("Get %q: %v", full, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10240))
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Success, ""
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

func doTCP(ctx context.Context, a *corev1.TCPSocketAction, t Target) (Result, string) {
	port, err := ResolvePort(a.Port, t.Container)
	if err != nil {
		return Failure, err.Error()
	}
	addr := net.JoinHostPort(hostOr(a.Host, t), strconv.Itoa(port))
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Failure, fmt.Sprintf("dial tcp %s: %v", addr, err)
	}
	_ = conn.Close()
	return Success, ""
}

func doGRPC(ctx context.Context, a *corev1.GRPCAction, t Target) (Result, string) {
	addr := net.JoinHostPort(t.PodIP, strconv.Itoa(int(a.Port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return Failure, fmt.Sprintf("grpc %s: %v", addr, err)
	}
	defer conn.Close()
	svc := ""
	if a.Service != nil {
		svc = *a.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		return Failure, fmt.Sprintf("grpc health check %s: %v", addr, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus())
	}
	return Success, ""
}
