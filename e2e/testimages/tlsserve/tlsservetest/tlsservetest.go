// Package tlsservetest runs a program built on tlsserve inside a test, as
// its pod would run it: a serving certificate in files, signed by a CA of
// the test's own, on a loopback listener.
package tlsservetest

import (
	"context"
	"crypto/x509"
	"net"
	"sync"
	"testing"
	"time"

	"skiff/e2e/testimages/testpki"
	"skiff/e2e/testimages/tlsserve"
)

// stopBound is how long a stopped program may take to return: past
// tlsserve's own shutdown grace, so that a shutdown that waits it out
// still passes but one that never ends fails.
const stopBound = 10 * time.Second

// Server is the serving side of a test: CA signed the certificate that
// Config names, for 127.0.0.1 and localhost, and URL reaches Config's
// listener.
type Server struct {
	CA     *testpki.CA
	Config tlsserve.Config
	URL    string
}

// New makes a CA, a serving certificate for cn written as a mounted
// Secret's files, and a listener on 127.0.0.1; the test's end closes it.
func New(t testing.TB, cn string) *Server {
	t.Helper()
	ca := testpki.NewCA(t, cn+"-ca")
	certFile, keyFile := testpki.WritePair(t, t.TempDir(), ca.Issue(t, cn, x509.ExtKeyUsageServerAuth))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &Server{
		CA:     ca,
		Config: tlsserve.Config{CertFile: certFile, KeyFile: keyFile, Listener: ln},
		URL:    "https://" + ln.Addr().String(),
	}
}

// Start runs run in the background until stop is called or the test
// ends, whichever is first. Stopping ends run's context and fails the
// test when run returns an error or has not returned within stopBound.
func (s *Server) Start(t testing.TB, run func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run: %v", err)
				}
			case <-time.After(stopBound):
				t.Errorf("run did not return %v after its context ended", stopBound)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
