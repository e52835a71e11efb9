package join

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"skiff/jointoken"
	"skiff/server/certs"
	"skiff/store"
)

type fakeMembers struct {
	mu    sync.Mutex
	added map[string]string
	err   error
}

func (m *fakeMembers) AddVoter(_ context.Context, id, addr string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.added == nil {
		m.added = map[string]string{}
	}
	m.added[id] = addr
	return nil
}

// newServersFixture is a join handler that lets servers join when members
// is not nil.
func newServersFixture(t *testing.T, members *fakeMembers) (*certs.Bundle, *httptest.Server) {
	t.Helper()
	b, err := certs.Ensure(certs.Config{Dir: t.TempDir(), Hostname: "server"})
	if err != nil {
		t.Fatal(err)
	}
	caCert, caKey := b.CA()
	cfg := Config{CACert: caCert, CAKey: caKey, CAPEM: b.CACertPEM(), ServerSecret: serverSecret, Client: fake.NewClientset(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if members != nil {
		cfg.Members = members
		cfg.ClusterFiles = func() (map[string][]byte, error) {
			return map[string][]byte{certs.CACertFile: b.CACertPEM(), certs.CAKeyFile: []byte("ca key")}, nil
		}
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h.Wrap(http.NotFoundHandler()))
	srv.TLS = b.ServerTLSConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return b, srv
}

func TestServerJoin_ServerToken_GetsClusterFilesAndBecomesMember(t *testing.T) {
	members := &fakeMembers{}
	b, srv := newServersFixture(t, members)
	tok := jointoken.Token{CAHash: b.CAHash(), ID: jointoken.ServerID, Secret: serverSecret}
	cc := &ClusterClient{ServerURL: srv.URL, Token: tok}
	files, err := cc.FetchClusterFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(files[certs.CAKeyFile]) != "ca key" || string(files[certs.CACertFile]) != string(b.CACertPEM()) {
		t.Fatalf("files = %v", files)
	}
	if err := cc.RequestMembership(context.Background(), b.CACertPEM(), "s2", "10.0.0.2:2380"); err != nil {
		t.Fatal(err)
	}
	if got := members.added["s2"]; got != "10.0.0.2:2380" {
		t.Fatalf("added = %v", members.added)
	}
}

func TestServerJoin_Refusals(t *testing.T) {
	cases := []struct {
		name     string
		members  *fakeMembers
		token    func(hash string) jointoken.Token
		member   string
		addr     string
		wantCode int
		wantCA   bool // the failure is the CA pin, before any request
	}{
		{name: "wrong secret", members: &fakeMembers{}, token: func(h string) jointoken.Token {
			return jointoken.Token{CAHash: h, ID: jointoken.ServerID, Secret: "nope"}
		}, member: "s2", addr: "10.0.0.2:2380", wantCode: http.StatusUnauthorized},
		{name: "bootstrap token is not a server token", members: &fakeMembers{}, token: func(h string) jointoken.Token {
			return jointoken.Token{CAHash: h, ID: "abcdef", Secret: "0123456789abcdef"}
		}, member: "s2", addr: "10.0.0.2:2380", wantCode: http.StatusUnauthorized},
		{name: "no embedded cluster", members: nil, token: func(h string) jointoken.Token {
			return jointoken.Token{CAHash: h, ID: jointoken.ServerID, Secret: serverSecret}
		}, member: "s2", addr: "10.0.0.2:2380", wantCode: http.StatusBadRequest},
		{name: "bad member name", members: &fakeMembers{}, token: func(h string) jointoken.Token {
			return jointoken.Token{CAHash: h, ID: jointoken.ServerID, Secret: serverSecret}
		}, member: "Not_A_Name", addr: "10.0.0.2:2380", wantCode: http.StatusBadRequest},
		{name: "address without port", members: &fakeMembers{}, token: func(h string) jointoken.Token {
			return jointoken.Token{CAHash: h, ID: jointoken.ServerID, Secret: serverSecret}
		}, member: "s2", addr: "10.0.0.2", wantCode: http.StatusBadRequest},
		{name: "no quorum", members: &fakeMembers{err: fmt.Errorf("raft: %w: no leader", store.ErrUnavailable)}, token: func(h string) jointoken.Token {
			return jointoken.Token{CAHash: h, ID: jointoken.ServerID, Secret: serverSecret}
		}, member: "s2", addr: "10.0.0.2:2380", wantCode: http.StatusServiceUnavailable},
		{name: "token pins another CA", members: &fakeMembers{}, token: func(string) jointoken.Token {
			return jointoken.Token{CAHash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ID: jointoken.ServerID, Secret: serverSecret}
		}, member: "s2", addr: "10.0.0.2:2380", wantCA: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, srv := newServersFixture(t, tc.members)
			cc := &ClusterClient{ServerURL: srv.URL, Token: tc.token(b.CAHash())}
			_, err := cc.FetchClusterFiles(context.Background())
			if tc.wantCA {
				if !errors.Is(err, jointoken.ErrCAMismatch) {
					t.Fatalf("FetchClusterFiles: %v, want ErrCAMismatch", err)
				}
				return
			}
			if tc.members == nil || tc.token(b.CAHash()).Secret != serverSecret || !tc.token(b.CAHash()).IsServer() {
				checkStatus(t, "FetchClusterFiles", err, tc.wantCode)
			} else if err != nil {
				t.Fatalf("FetchClusterFiles: %v", err)
			}
			err = cc.RequestMembership(context.Background(), b.CACertPEM(), tc.member, tc.addr)
			checkStatus(t, "RequestMembership", err, tc.wantCode)
			if tc.members != nil && len(tc.members.added) != 0 {
				t.Fatalf("a refused join added members: %v", tc.members.added)
			}
		})
	}
}

func checkStatus(t *testing.T, what string, err error, code int) {
	t.Helper()
	var se *StatusError
	if !errors.As(err, &se) || se.Code != code || !errors.Is(err, ErrServerJoin) {
		t.Fatalf("%s: %v, want a %d StatusError", what, err, code)
	}
}
