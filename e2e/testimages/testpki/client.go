package testpki

import (
	"crypto/tls"
	"net/http"
	"time"
)

// Client is an HTTPS client that trusts only c and presents certs (a
// client certificate, as the aggregator's front-proxy one) when the server
// asks. Each request is bounded, so that a test against a server that
// stopped answering fails instead of hanging.
func (c *CA) Client(certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: c.Pool(), Certificates: certs,
	}}}
}
