package join

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/jointoken"
)

const maxResponse = 1 << 20

// fetchVerifiedCA downloads the CA bundle and accepts it only if its hash
// is the token's (jointoken.FetchVerifiedCA).
func fetchVerifiedCA(ctx context.Context, cfg Config, tok jointoken.Token) ([]byte, error) {
	return jointoken.FetchVerifiedCA(ctx, cfg.ServerURL, tok.CAHash, cfg.Timeout)
}

type authMode int

const (
	authToken authMode = iota
	authClientCert
)

// issued is a fresh set of certificates and their keys.
type issued struct {
	clientCert, clientKey, servingCert, servingKey []byte
}

// request asks the server for certificates over TLS verified with the
// token-vouched CA.
func (c *Credentials) request(ctx context.Context, mode authMode, password string) (*issued, error) {
	clientKey, clientCSR, err := newCSR(&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + c.NodeName, Organization: []string{"system:nodes"}}})
	if err != nil {
		return nil, err
	}
	dns := append([]string{c.NodeName}, c.cfg.DNSNames...)
	servingKey, servingCSR, err := newCSR(&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + c.NodeName, Organization: []string{"system:nodes"}},
		DNSNames: dns, IPAddresses: c.cfg.NodeIPs})
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(jointoken.NodeCertsRequest{NodeName: c.NodeName, NodePassword: password, ClientCSR: string(clientCSR), ServingCSR: string(servingCSR)})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(c.CAPEM))
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if mode == authClientCert {
		tlsCfg.GetClientCertificate = c.GetClientCertificate
	}
	client := &http.Client{Timeout: c.cfg.Timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.ServerURL, "/")+jointoken.NodeCertsPath, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if mode == authToken {
		c.token.SetAuth(req)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("join: request node certificates from %s: %w", c.ServerURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("join: read the server's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, data)
	}
	var out jointoken.NodeCertsResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("join: the server's answer is not valid: %w", err)
	}
	res := &issued{clientCert: []byte(out.ClientCert), clientKey: clientKey, servingCert: []byte(out.ServingCert), servingKey: servingKey}
	if err := c.check(res); err != nil {
		return nil, err
	}
	return res, nil
}

// statusError words a refusal, with the server's own message.
func statusError(resp *http.Response, data []byte) error {
	msg := strings.TrimSpace(string(data))
	var st metav1.Status
	if json.Unmarshal(data, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("join: the server refused the token (%s): %s: %w", resp.Status, msg, ErrUnauthorized)
	case http.StatusForbidden:
		return fmt.Errorf("join: the server refused the node (%s): %s: %w", resp.Status, msg, ErrForbidden)
	}
	return fmt.Errorf("join: the server answered %s: %s", resp.Status, msg)
}

// check verifies the issued certificates chain to the trusted CA and are
// for our keys.
func (c *Credentials) check(res *issued) error {
	if _, err := loadPair(res.clientCert, res.clientKey, []byte(c.CAPEM), x509.ExtKeyUsageClientAuth, c.NodeName); err != nil {
		return fmt.Errorf("join: the server's client certificate: %w", err)
	}
	if _, err := loadPair(res.servingCert, res.servingKey, []byte(c.CAPEM), x509.ExtKeyUsageServerAuth, c.NodeName); err != nil {
		return fmt.Errorf("join: the server's serving certificate: %w", err)
	}
	return nil
}

// newCSR makes a P-256 key and a CSR from tmpl, both PEM.
func newCSR(tmpl *x509.CertificateRequest) (keyPEM, csrPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("join: generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, nil, fmt.Errorf("join: create CSR: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("join: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// loadPair parses a cert/key pair and checks it chains to caPEM for usage
// and names node.
func loadPair(certPEM, keyPEM, caPEM []byte, usage x509.ExtKeyUsage, node string) (*pairHalf, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)}); err != nil {
		return nil, err
	}
	if leaf.Subject.CommonName != "system:node:"+node {
		return nil, errors.New("it is for " + leaf.Subject.CommonName + ", not system:node:" + node)
	}
	pair.Leaf = leaf
	return &pairHalf{tls: pair, x509: leaf}, nil
}

type pairHalf struct {
	tls  tls.Certificate
	x509 *x509.Certificate
}
