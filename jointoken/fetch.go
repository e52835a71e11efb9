package jointoken

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ErrCAMismatch means the CA a server presented is not the one the token
// names: nothing it says can be trusted.
var ErrCAMismatch = errors.New("the server's CA does not match the join token")

const maxCAResponse = 1 << 20

// FetchVerifiedCA downloads the CA bundle of the server at serverURL
// without verifying the server (there is nothing to verify it with yet)
// and accepts it only if its hash is caHash.
func FetchVerifiedCA(ctx context.Context, serverURL, caHash string, timeout time.Duration) ([]byte, error) {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // checked against the token's hash below
		Proxy:           http.ProxyFromEnvironment,
	}}
	defer client.CloseIdleConnections()
	u := strings.TrimSuffix(serverURL, "/") + CACertsPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("join: fetch the CA from %s: %w", serverURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCAResponse))
	if err != nil {
		return nil, fmt.Errorf("join: fetch the CA from %s: %w", serverURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("join: fetch the CA from %s: %s", u, resp.Status)
	}
	if got := CAHash(body); got != caHash {
		return nil, fmt.Errorf("join: the server's CA (sha256 %s) does not match the token's hash (%s): refusing to trust %s: %w",
			abbrev(got), abbrev(caHash), serverURL, ErrCAMismatch)
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(body) {
		return nil, fmt.Errorf("join: the CA served by %s holds no certificate", serverURL)
	}
	return body, nil
}

func abbrev(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}
