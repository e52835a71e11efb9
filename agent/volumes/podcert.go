package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// PodCertificates issues the credentials of podCertificate projected
// sources (agent/podcertificate implements it).
type PodCertificates interface {
	// Credentials returns the PEM private key and certificate chain of
	// the source identified by key, requesting a certificate when there is
	// none yet or the current one is due for refresh.
	Credentials(ctx context.Context, pod *corev1.Pod, key string, src *corev1.PodCertificateProjection) (keyPEM, chainPEM []byte, err error)
	// Forget drops the credentials of a pod that is gone.
	Forget(podUID string)
}

// errNoPodCertificates: the agent was started without a certificate
// requester, so the pod cannot get what it asks for.
var errNoPodCertificates = errors.New("podCertificate projections are not available on this node")

// podCertificatePayload writes the key and chain where the source asks:
// the credential bundle (key, then chain), the key alone, the chain alone.
func (m *Manager) podCertificatePayload(ctx context.Context, pod *corev1.Pod, key string, src *corev1.PodCertificateProjection, def os.FileMode) (payload, error) {
	if m.cfg.PodCertificates == nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, errNoPodCertificates)
	}
	for _, p := range []string{src.CredentialBundlePath, src.KeyPath, src.CertificateChainPath} {
		if p == "" {
			continue
		}
		if err := validatePath(p); err != nil {
			return nil, fmt.Errorf("podCertificate: %w", err)
		}
	}
	keyPEM, chainPEM, err := m.cfg.PodCertificates.Credentials(ctx, pod, key, src)
	if err != nil {
		return nil, fmt.Errorf("podCertificate for signer %q: %w", src.SignerName, err)
	}
	p := payload{}
	if src.CredentialBundlePath != "" {
		bundle := append(append([]byte{}, keyPEM...), chainPEM...)
		p[filepath.Clean(src.CredentialBundlePath)] = file{Data: bundle, Mode: def}
	}
	if src.KeyPath != "" {
		p[filepath.Clean(src.KeyPath)] = file{Data: keyPEM, Mode: def}
	}
	if src.CertificateChainPath != "" {
		p[filepath.Clean(src.CertificateChainPath)] = file{Data: chainPEM, Mode: def}
	}
	return p, nil
}
