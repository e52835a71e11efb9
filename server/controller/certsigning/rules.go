package certsigning

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// nodeUserPrefix starts the user name of every kubelet, and the common
// name of every certificate issued to one.
const nodeUserPrefix = "system:node:"

// nodesGroup is the one organization a kubelet's certificates carry.
const nodesGroup = "system:nodes"

// signers are the signer names this controller issues for.
var signers = []string{
	certv1.KubeAPIServerClientSignerName,
	certv1.KubeAPIServerClientKubeletSignerName,
	certv1.KubeletServingSignerName,
}

// The usage sets a kubelet's certificates must have exactly; RSA keys
// add key encipherment, other keys need not.
var (
	kubeletClientUsages = []sets.Set[certv1.KeyUsage]{
		sets.New(certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageClientAuth),
		sets.New(certv1.UsageDigitalSignature, certv1.UsageClientAuth),
	}
	kubeletServingUsages = []sets.Set[certv1.KeyUsage]{
		sets.New(certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageServerAuth),
		sets.New(certv1.UsageDigitalSignature, certv1.UsageServerAuth),
	}
)

// parseRequest reads the PEM certificate request of a CSR.
func parseRequest(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	return req, nil
}

// checkSigner applies the signer's rules, as upstream's signers do: what
// a certificate of that signer may say and be used for.
func checkSigner(signer string, req *x509.CertificateRequest, usages []certv1.KeyUsage) error {
	switch signer {
	case certv1.KubeAPIServerClientSignerName:
		return checkClientUsages(usages)
	case certv1.KubeAPIServerClientKubeletSignerName:
		return checkKubeletClient(req, usages)
	case certv1.KubeletServingSignerName:
		return checkKubeletServing(req, usages)
	}
	return fmt.Errorf("signer %q is not handled here", signer)
}

// checkClientUsages: a client certificate is for client auth, with
// optionally the key usages that go with it, and nothing else.
func checkClientUsages(usages []certv1.KeyUsage) error {
	client := false
	for _, u := range usages {
		switch u {
		case certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment:
		case certv1.UsageClientAuth:
			client = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !client {
		return fmt.Errorf("missing required usage for client certificate: %s", certv1.UsageClientAuth)
	}
	return nil
}

func checkKubeletClient(req *x509.CertificateRequest, usages []certv1.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return errors.New("subject organization is not system:nodes")
	}
	switch {
	case len(req.DNSNames) > 0:
		return errors.New("DNS subjectAltNames are not allowed")
	case len(req.EmailAddresses) > 0:
		return errors.New("Email subjectAltNames are not allowed")
	case len(req.IPAddresses) > 0:
		return errors.New("IP subjectAltNames are not allowed")
	case len(req.URIs) > 0:
		return errors.New("URI subjectAltNames are not allowed")
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix) {
		return errors.New("subject common name does not begin with system:node:")
	}
	if !usagesOneOf(usages, kubeletClientUsages) {
		return fmt.Errorf("usages did not match %v", sets.List(kubeletClientUsages[0]))
	}
	return nil
}

func checkKubeletServing(req *x509.CertificateRequest, usages []certv1.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return errors.New("subject organization is not system:nodes")
	}
	switch {
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return errors.New("DNS or IP subjectAltName is required")
	case len(req.EmailAddresses) > 0:
		return errors.New("Email subjectAltNames are not allowed")
	case len(req.URIs) > 0:
		return errors.New("URI subjectAltNames are not allowed")
	}
	if !usagesOneOf(usages, kubeletServingUsages) {
		return fmt.Errorf("usages did not match %v", sets.List(kubeletServingUsages[0]))
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix) {
		return errors.New("subject common name does not begin with system:node:")
	}
	return nil
}

func usagesOneOf(usages []certv1.KeyUsage, allowed []sets.Set[certv1.KeyUsage]) bool {
	got := sets.New(usages...)
	return slices.ContainsFunc(allowed, got.Equal)
}

// approvalState reads the approval conditions; a CSR both approved and
// denied counts as denied.
func approvalState(csr *certv1.CertificateSigningRequest) (approved, denied bool) {
	for _, c := range csr.Status.Conditions {
		if c.Status == corev1.ConditionFalse {
			continue
		}
		switch c.Type {
		case certv1.CertificateApproved:
			approved = true
		case certv1.CertificateDenied:
			denied = true
		}
	}
	return approved && !denied, denied
}

func hasFailed(csr *certv1.CertificateSigningRequest) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c certv1.CertificateSigningRequestCondition) bool {
		return c.Type == certv1.CertificateFailed && c.Status != corev1.ConditionFalse
	})
}

// approvers are who may have kubelet client certificates approved
// without a person looking.
type approvers struct {
	users, groups sets.Set[string]
}

// approve decides whether a pending CSR is approved automatically, with
// the message saying why. Only kubelet client certificates are: a kubelet
// renewing its own (the requester is the node the certificate names), or
// one requested by a trusted requester (the join flow's identity).
func (a approvers) approve(csr *certv1.CertificateSigningRequest, req *x509.CertificateRequest) (bool, string) {
	if csr.Spec.SignerName != certv1.KubeAPIServerClientKubeletSignerName || checkKubeletClient(req, csr.Spec.Usages) != nil {
		return false, ""
	}
	if csr.Spec.Username == req.Subject.CommonName {
		return true, "Auto approving self kubelet client certificate."
	}
	if a.users.Has(csr.Spec.Username) || a.groups.HasAny(csr.Spec.Groups...) {
		return true, fmt.Sprintf("Auto approving kubelet client certificate requested by %s.", csr.Spec.Username)
	}
	return false, ""
}
