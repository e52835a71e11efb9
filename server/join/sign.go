package join

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"skiff/jointoken"
)

// backdate absorbs clock skew between server and node, as the server's own
// certificates do.
const backdate = time.Hour

// issue signs both CSRs of req for its node.
func (h *Handler) issue(req jointoken.NodeCertsRequest, from net.IP) (*jointoken.NodeCertsResponse, error) {
	clientCSR, err := parseCSR("clientCSR", req.ClientCSR)
	if err != nil {
		return nil, err
	}
	servingCSR, err := parseCSR("servingCSR", req.ServingCSR)
	if err != nil {
		return nil, err
	}
	dns, ips, err := h.servingSANs(req.NodeName, servingCSR, from)
	if err != nil {
		return nil, err
	}
	subject := pkix.Name{CommonName: NodeUserPrefix + req.NodeName, Organization: []string{NodesGroup}}
	client, err := h.sign(&x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, clientCSR)
	if err != nil {
		return nil, err
	}
	serving, err := h.sign(&x509.Certificate{Subject: subject, DNSNames: dns, IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, servingCSR)
	if err != nil {
		return nil, err
	}
	return &jointoken.NodeCertsResponse{ClientCert: string(client), ServingCert: string(serving), CACert: string(h.cfg.CAPEM)}, nil
}

// parseCSR reads a PEM certificate request and checks its signature: the
// requester must hold the key it asks a certificate for.
func parseCSR(field, data string) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode([]byte(data))
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("join: %s is not a PEM CERTIFICATE REQUEST", field))
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err == nil {
		err = csr.CheckSignature()
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("join: %s: %v", field, err))
	}
	return csr, nil
}

// servingSANs are the names a node's serving certificate may carry: its
// own name and the host names and addresses it asks for. Asking for the
// API server's in-cluster names, or for the server's own addresses unless
// the node joins from one of them, is refused; localhost, loopback,
// unspecified and multicast addresses are left out.
func (h *Handler) servingSANs(node string, csr *x509.CertificateRequest, from net.IP) ([]string, []net.IP, error) {
	dns := []string{node}
	for _, name := range csr.DNSNames {
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("join: serving certificate name %q is not valid: %s", name, strings.Join(errs, "; ")))
		}
		if name == "localhost" {
			continue // meaningless from outside the node: left out
		}
		if reservedName(name) {
			return nil, nil, apierrors.NewForbidden(nodeCertsResource, node, fmt.Errorf("a node's serving certificate may not name %q", name))
		}
		if !slices.Contains(dns, name) {
			dns = append(dns, name)
		}
	}
	local := false
	for _, a := range h.cfg.ServerAddresses {
		local = local || a.Equal(from)
	}
	local = local || (from != nil && from.IsLoopback())
	var ips []net.IP
	for _, ip := range csr.IPAddresses {
		if ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() {
			continue // no one reaches the node there: left out
		}
		if !local && slices.ContainsFunc(h.cfg.ServerAddresses, ip.Equal) {
			return nil, nil, apierrors.NewForbidden(nodeCertsResource, node, fmt.Errorf("address %s is the server's: only a node on the server's machine may claim it", ip))
		}
		ips = append(ips, ip)
	}
	return dns, ips, nil
}

// reservedName: the API server's names inside the cluster.
func reservedName(name string) bool {
	switch {
	case name == "kubernetes", strings.HasPrefix(name, "kubernetes.default"):
		return true
	case strings.HasSuffix(name, ".svc"), strings.Contains(name, ".svc."):
		return true
	}
	return false
}

// sign issues tmpl for the CSR's key, valid for CertTTL (capped at the
// CA's own expiry).
func (h *Handler) sign(tmpl *x509.Certificate, csr *x509.CertificateRequest) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("join: serial: %w", err)
	}
	now := h.cfg.Now()
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(h.cfg.CertTTL)
	if tmpl.NotAfter.After(h.cfg.CACert.NotAfter) {
		tmpl.NotAfter = h.cfg.CACert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, h.cfg.CACert, csr.PublicKey, h.cfg.CAKey)
	if err != nil {
		return nil, fmt.Errorf("join: sign certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
