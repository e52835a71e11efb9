package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore is how close to expiry a managed leaf cert is re-issued
	// on start, matching k3s.
	renewBefore = 90 * 24 * time.Hour
	// backdate absorbs clock skew between the server and agents that check
	// a freshly issued cert's NotBefore.
	backdate = time.Hour
)

// authority is the cluster CA: it signs every serving and client cert.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	now  func() time.Time
}

// leafSpec describes a certificate to sign.
type leafSpec struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	usages []x509.ExtKeyUsage
	ttl    time.Duration
}

func newECKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate P-256 key: %w", err)
	}
	return k, nil
}

// newSerial returns a random positive 128-bit serial, as RFC 5280 asks
// (unique per CA, at most 20 octets).
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// newAuthority creates a self-signed CA named skiff-server-ca@<unix time>;
// the timestamp keeps CAs of re-created clusters distinguishable.
func newAuthority(now func() time.Time) (*authority, error) {
	return newNamedAuthority("skiff-server-ca", now)
}

// newNamedAuthority creates a self-signed CA named <name>@<unix time>.
func newNamedAuthority(name string, now func() time.Time) (*authority, error) {
	key, err := newECKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name + "@" + strconv.FormatInt(t.Unix(), 10)},
		NotBefore:             t.Add(-backdate),
		NotAfter:              t.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key, now: now}, nil
}

// sign issues a certificate for pub. Its lifetime is capped at the CA's so
// no leaf outlives its issuer.
func (a *authority) sign(spec leafSpec, pub crypto.PublicKey) ([]byte, error) {
	if spec.ttl <= 0 {
		return nil, fmt.Errorf("certificate %q: ttl must be positive, got %s", spec.cn, spec.ttl)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	t := a.now()
	notAfter := t.Add(spec.ttl)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	// Digital signature only: leaves carry P-256 keys, for which key
	// encipherment has no meaning.
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:             t.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           spec.usages,
		BasicConstraintsValid: true,
		DNSNames:              spec.dns,
		IPAddresses:           spec.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", spec.cn, err)
	}
	return encodeCertPEM(der), nil
}

// issueWithNewKey signs spec for a fresh P-256 key.
func (a *authority) issueWithNewKey(spec leafSpec) (certPEM, keyPEM []byte, err error) {
	key, err := newECKey()
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = a.sign(spec, key.Public())
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// issued reports whether cert was signed by this CA, so a cert left over
// from a replaced CA gets re-issued instead of served.
func (a *authority) issued(cert *x509.Certificate) bool {
	return cert.CheckSignatureFrom(a.cert) == nil
}

// dueForRenewal reports whether cert expires within renewBefore.
func (a *authority) dueForRenewal(cert *x509.Certificate) bool {
	return a.now().Add(renewBefore).After(cert.NotAfter)
}

// validateCA checks that a CA loaded from disk can actually sign with key.
func validateCA(cert *x509.Certificate, key crypto.Signer) error {
	if !cert.IsCA {
		return errors.New("certificate is not a CA")
	}
	if !keyMatches(cert, key) {
		return errors.New("key does not match certificate")
	}
	return nil
}
