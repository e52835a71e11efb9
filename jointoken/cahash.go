package jointoken

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
)

// CAHash is the <hash> of a token for the CA bundle served at /cacerts, as
// k3s computes it: for a single-cert bundle the hex SHA-256 of the PEM
// bytes as they are; for a multi-cert bundle, of the DER of the root the
// first cert chains to, so renewing an intermediate keeps tokens valid.
// The server and every joining agent must call this same function.
func CAHash(bundle []byte) string {
	hashed := bundle
	if certs := parseCerts(bundle); len(certs) > 1 {
		if root := chainRoot(certs); root != nil {
			hashed = root.Raw
		}
	}
	sum := sha256.Sum256(hashed)
	return hex.EncodeToString(sum[:])
}

// parseCerts returns the certificates of a PEM bundle, nil if any is bad.
func parseCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil
		}
		out = append(out, c)
	}
}

// chainRoot finds the root certs[0] verifies to using the rest of the
// bundle: self-issued certs as roots, the others as intermediates.
func chainRoot(certs []*x509.Certificate) *x509.Certificate {
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range certs[1:] {
		if len(c.AuthorityKeyId) == 0 || bytes.Equal(c.AuthorityKeyId, c.SubjectKeyId) {
			roots.AddCert(c)
		} else {
			inter.AddCert(c)
		}
	}
	// Default options (now, server-auth usage) on purpose: joining agents
	// compute the hash the k3s way and must arrive at the same bytes.
	chains, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	if err != nil || len(chains) == 0 {
		return nil
	}
	chain := chains[0]
	return chain[len(chain)-1]
}
