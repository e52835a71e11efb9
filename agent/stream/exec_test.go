package stream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

func TestHandler_RejectsClientsWithoutTheAPIServerCertificate(t *testing.T) {
	ts := startTestServer(t)
	tests := []struct {
		name string
		cn   string
		path string
		want int
	}{
		{"no certificate is unauthorized", "", "/containerLogs/ns1/web/app", http.StatusUnauthorized},
		{"another identity is forbidden", "system:node:other", "/containerLogs/ns1/web/app", http.StatusForbidden},
		{"an admin certificate is forbidden", "system:admin", "/exec/ns1/web/app?command=ls&stdout=1", http.StatusForbidden},
		{"healthz needs no certificate", "", "/healthz", http.StatusOK},
		{"the API server reaches a missing pod", DefaultClientCN, "/containerLogs/ns1/nope/app", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: ts.tlsConfig(t, tt.cn)}, Timeout: 10 * time.Second}
			resp, err := c.Get(ts.url + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	t.Run("a certificate from another CA fails the handshake", func(t *testing.T) {
		other := newTestPKI(t)
		cert, key := other.issue(t, DefaultClientCN, false)
		cfg := &rest.Config{Host: ts.url, TLSClientConfig: rest.TLSClientConfig{CAData: ts.pki.caPEM, CertData: cert, KeyData: key}}
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Get(ts.url + "/containerLogs/ns1/web/app")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("request succeeded with %d", resp.StatusCode)
		}
	})
}

// executor builds the client-go executor of one transport.
type executor func(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor

var executors = map[string]executor{
	"spdy": func(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor {
		e, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		return e
	},
	"websocket": func(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor {
		e, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
		if err != nil {
			t.Fatal(err)
		}
		return e
	},
}

func commandURL(t *testing.T, base, kind string, cmd []string, q string) *url.URL {
	v := url.Values{"command": cmd}
	raw := base + "/" + kind + "/ns1/web/app?" + v.Encode()
	if q != "" {
		raw += "&" + q
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestExec_StreamsAndReportsExitCodes(t *testing.T) {
	ts := startTestServer(t)
	cfg := ts.restConfig(t, DefaultClientCN)
	tests := []struct {
		name       string
		cmd        []string
		stdin      string
		wantOut    string
		wantErr    string
		wantCode   int
		wantFailed bool
	}{
		{name: "output is streamed", cmd: []string{"echo", "hello", "world"}, wantOut: "hello world\n"},
		{name: "stdin reaches the command and its end is passed on", cmd: []string{"cat"}, stdin: "some input\n", wantOut: "some input\n"},
		{name: "a non-zero exit code is reported", cmd: []string{"exit", "3"}, wantErr: "bye\n", wantCode: 3},
		{name: "a runtime failure is an error", cmd: []string{"nonsense"}, wantFailed: true},
	}
	for transport, mk := range executors {
		for _, tt := range tests {
			t.Run(transport+"/"+tt.name, func(t *testing.T) {
				q := "stdout=1&stderr=1"
				if tt.stdin != "" {
					q += "&stdin=1"
				}
				e := mk(t, cfg, commandURL(t, ts.url, "exec", tt.cmd, q))
				var stdout, stderr bytes.Buffer
				opts := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
				if tt.stdin != "" {
					opts.Stdin = strings.NewReader(tt.stdin)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err := e.StreamWithContext(ctx, opts)
				var exitErr exec.ExitError
				switch {
				case tt.wantCode != 0:
					if !errors.As(err, &exitErr) || exitErr.ExitStatus() != tt.wantCode {
						t.Fatalf("err = %v, want exit code %d", err, tt.wantCode)
					}
				case tt.wantFailed:
					if err == nil || errors.As(err, &exitErr) {
						t.Fatalf("err = %v, want a non-exit-code error", err)
					}
				case err != nil:
					t.Fatalf("stream: %v", err)
				}
				if stdout.String() != tt.wantOut || stderr.String() != tt.wantErr {
					t.Fatalf("stdout %q stderr %q, want %q and %q", stdout.String(), stderr.String(), tt.wantOut, tt.wantErr)
				}
			})
		}
	}
}

// sizeQueue hands out terminal sizes, then ends with 0x0.
type sizeQueue struct {
	sizes chan *remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize { return <-q.sizes }

func TestExec_TTYResizesReachTheCommand(t *testing.T) {
	ts := startTestServer(t)
	cfg := ts.restConfig(t, DefaultClientCN)
	for transport, mk := range executors {
		t.Run(transport, func(t *testing.T) {
			e := mk(t, cfg, commandURL(t, ts.url, "exec", []string{"resize"}, "stdout=1&stdin=1&tty=1"))
			q := &sizeQueue{sizes: make(chan *remotecommand.TerminalSize, 3)}
			q.sizes <- &remotecommand.TerminalSize{Width: 80, Height: 24}
			q.sizes <- &remotecommand.TerminalSize{Width: 132, Height: 43}
			q.sizes <- &remotecommand.TerminalSize{Width: 0, Height: 0} // the fake's signal to stop
			pr, pw := io.Pipe()
			defer pw.Close()
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: pr, Stdout: &out, Tty: true, TerminalSizeQueue: q})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := out.String(), "80x24\n132x43\n0x0\n"; got != want {
				t.Fatalf("output %q, want %q", got, want)
			}
			ts.rt.mu.Lock()
			last := ts.rt.execs[len(ts.rt.execs)-1]
			ts.rt.mu.Unlock()
			if !last.TTY || last.Stderr != nil {
				t.Fatalf("exec request TTY=%v Stderr=%v, want a TTY without stderr", last.TTY, last.Stderr)
			}
		})
	}
}

func TestAttach_ConnectsStreams(t *testing.T) {
	ts := startTestServer(t)
	cfg := ts.restConfig(t, DefaultClientCN)
	for transport, mk := range executors {
		t.Run(transport, func(t *testing.T) {
			u, _ := url.Parse(ts.url + "/attach/ns1/web/app?stdin=1&stdout=1")
			e := mk(t, cfg, u)
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := out.String(), "attached\ntyped\n"; got != want {
				t.Fatalf("output %q, want %q", got, want)
			}
		})
	}
}

func TestExec_RefusesBadRequestsBeforeUpgrading(t *testing.T) {
	ts := startTestServer(t)
	ts.pods.set("ns1/web/stopped", ContainerRef{ID: "c2"})
	cfg := ts.restConfig(t, DefaultClientCN)
	tests := []struct {
		name, path, want string
	}{
		{"no streams", "/exec/ns1/web/app?command=ls", "at least 1 of stdin, stdout, stderr"},
		{"no command", "/exec/ns1/web/app?stdout=1", "at least one command"},
		{"unknown container", "/exec/ns1/web/nope?command=ls&stdout=1", "not found"},
		{"stopped container", "/exec/ns1/web/stopped?command=ls&stdout=1", "is not running"},
	}
	for transport, mk := range executors {
		for _, tt := range tests {
			t.Run(transport+"/"+tt.name, func(t *testing.T) {
				u, _ := url.Parse(ts.url + tt.path)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err := mk(t, cfg, u).StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
				if err == nil || (transport == "spdy" && !strings.Contains(err.Error(), tt.want)) {
					t.Fatalf("err = %v, want one saying %q", err, tt.want)
				}
			})
		}
	}
}
