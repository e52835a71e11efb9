package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files of a throwaway CA: one certificate for the members
// (serving clients and peers, and dialling peers: etcd uses the peer
// certificate both ways) and one for clients.
type pki struct {
	CA, MemberCert, MemberKey, ClientCert, ClientKey string
}

func writePKI(dir string, ips []net.IP) (pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "etcdtest-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return pki{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return pki{}, err
	}
	p := pki{CA: filepath.Join(dir, "ca.crt")}
	if err := writePEM(p.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return pki{}, err
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if p.MemberCert, p.MemberKey, err = issue(dir, "member", ca, caKey, both, ips); err != nil {
		return pki{}, err
	}
	if p.ClientCert, p.ClientKey, err = issue(dir, "client", ca, caKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil); err != nil {
		return pki{}, err
	}
	return p, nil
}

func issue(dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage []x509.ExtKeyUsage, ips []net.IP) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "etcdtest-" + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: usage, KeyUsage: x509.KeyUsageDigitalSignature,
		IPAddresses: append([]net.IP{net.ParseIP("127.0.0.1")}, ips...), DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
