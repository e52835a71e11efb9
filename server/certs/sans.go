package certs

import (
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"
)

// servingSANs is the subject-alternative-name set the API serving cert must
// cover: every name a client may dial, in-cluster or from outside.
func servingSANs(cfg Config) (dns []string, ips []net.IP, err error) {
	dns = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc." + cfg.ClusterDomain}
	if cfg.Hostname != "" {
		dns = append(dns, cfg.Hostname)
	}
	ips = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, cfg.ServiceIP}
	ips = append(ips, cfg.Addresses...)
	for _, s := range cfg.ExtraSANs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
			continue
		}
		if err := checkDNSName(s); err != nil {
			return nil, nil, fmt.Errorf("tls-san %q: %w", s, err)
		}
		dns = append(dns, s)
	}
	return dedupDNS(dns), dedupIPs(ips), nil
}

// checkDNSName rejects strings that cannot be a DNS SAN, so a typo in
// --tls-san fails at start with a clear message rather than deep inside
// certificate creation.
func checkDNSName(s string) error {
	if len(s) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("empty or over-long label")
		}
		for _, r := range label {
			ok := r == '-' || r == '_' || r == '*' || r >= '0' && r <= '9' ||
				r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			if !ok {
				return fmt.Errorf("invalid character %q", r)
			}
		}
	}
	return nil
}

func dedupDNS(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func dedupIPs(ips []net.IP) []net.IP {
	out := make([]net.IP, 0, len(ips))
	for _, ip := range ips {
		if ip == nil {
			continue
		}
		if !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	return out
}

// coversSANs reports whether cert already names every wanted DNS name and
// IP. Extra names in the cert are fine: dropping a --tls-san does not force
// a new cert, adding one does.
func coversSANs(cert *x509.Certificate, dns []string, ips []net.IP) bool {
	for _, d := range dns {
		if !slices.ContainsFunc(cert.DNSNames, func(have string) bool { return strings.EqualFold(have, d) }) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}
