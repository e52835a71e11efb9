package certsigning

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"time"

	certv1 "k8s.io/api/certificates/v1"
)

const (
	// backdate is how far NotBefore is set in the past, so a certificate
	// is valid at once on a host whose clock is a little behind ours.
	backdate = 5 * time.Minute
	// short: a certificate living less than this is not lengthened by the
	// backdate (5 minutes would be a large part of its life).
	short = 8 * time.Hour
	// minDuration is the shortest certificate issued, whatever is asked:
	// twice the backdate, so it is valid for some time at all.
	minDuration = 10 * time.Minute
)

// ca is the authority certificates are signed with.
type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// duration is how long the certificate lives: the configured duration,
// or less when the request asks for less.
func duration(limit time.Duration, expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return limit
	}
	d := time.Duration(*expirationSeconds) * time.Second
	switch {
	case d > limit:
		return limit
	case d < minDuration:
		return minDuration
	}
	return d
}

// keyUsages maps the API's usages onto x509's.
func keyUsages(usages []certv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	var unknown []certv1.KeyUsage
	for _, u := range usages {
		if k, ok := keyUsageOf[u]; ok {
			ku |= k
		} else if e, ok := extKeyUsageOf[u]; ok {
			if !slices.Contains(ext, e) {
				ext = append(ext, e)
			}
		} else {
			unknown = append(unknown, u)
		}
	}
	if len(unknown) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unknown)
	}
	slices.Sort(ext)
	return ku, ext, nil
}

var keyUsageOf = map[certv1.KeyUsage]x509.KeyUsage{
	certv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certv1.UsageCertSign:          x509.KeyUsageCertSign,
	certv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsageOf = map[certv1.KeyUsage]x509.ExtKeyUsage{
	certv1.UsageAny:             x509.ExtKeyUsageAny,
	certv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// sign issues a certificate for the request: its subject, names and key,
// the usages the CSR lists, and none of the extensions it asks for (a
// request cannot make itself a CA). The certificate ends no later than
// the CA does.
func (a *ca) sign(req *x509.CertificateRequest, usages []certv1.KeyUsage, ttl time.Duration, now time.Time) ([]byte, *x509.Certificate, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, nil, fmt.Errorf("unable to verify certificate request signature: %w", err)
	}
	if !now.Before(a.cert.NotAfter) {
		return nil, nil, fmt.Errorf("the signer has expired: NotAfter=%v", a.cert.NotAfter)
	}
	ku, ext, err := keyUsages(usages)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial number: %w", err)
	}
	notBefore := now.Add(-backdate)
	notAfter := notBefore.Add(ttl)
	if ttl < short {
		notAfter = now.Add(ttl)
	}
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               req.Subject,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		EmailAddresses:        req.EmailAddresses,
		URIs:                  req.URIs,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              ku,
		ExtKeyUsage:           ext,
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, req.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse issued certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, nil
}
