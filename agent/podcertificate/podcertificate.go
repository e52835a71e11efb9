// Package podcertificate is the kubelet's side of podCertificate projected
// volumes: for each source it makes a private key of the asked type, sends
// a PodCertificateRequest naming the pod, its service account and this
// node, waits for the signer to issue it, and asks again from the time the
// signer gave as beginRefreshAt. Keys never leave the node.
package podcertificate

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ErrPending is returned (wrapped) while the signer has not answered: the
// volume is retried on the pod's next sync.
var ErrPending = errors.New("pod certificate not issued yet")

// ErrRefused is returned (wrapped) when the signer denied the request or
// failed to issue it; the next sync sends a new request.
var ErrRefused = errors.New("pod certificate request refused")

const defaultMaxExpirationSeconds = 86400

// Config configures a Manager.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	Logger   *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Wait is how long Credentials waits for a signer before reporting
	// ErrPending (15 s when zero); Poll how often it looks (500 ms).
	Wait, Poll time.Duration
}

// Manager implements agent/volumes.PodCertificates. It is safe for
// concurrent use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one source's credentials and its request in flight.
type entry struct {
	podUID string
	// Issued credentials, if any.
	keyPEM, chainPEM       []byte
	beginRefresh, notAfter time.Time
	// The request waiting for a signer, and the key it is for.
	pending    string
	pendingKey crypto.Signer
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 15 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	return &Manager{cfg: cfg, entries: map[string]*entry{}}
}

// Forget drops every source of the pod.
func (m *Manager) Forget(podUID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.entries {
		if e.podUID == podUID {
			delete(m.entries, k)
		}
	}
}

// Credentials returns the source's PEM key and chain: the current ones
// until beginRefreshAt, then those of a new request once issued (the
// current ones meanwhile, while they have not expired).
func (m *Manager) Credentials(ctx context.Context, pod *corev1.Pod, key string, src *corev1.PodCertificateProjection) ([]byte, []byte, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	e, ok := m.entries[key]
	if !ok {
		e = &entry{podUID: string(pod.UID)}
		m.entries[key] = e
	}
	cur := *e
	m.mu.Unlock()
	if cur.keyPEM != nil && now.Before(cur.beginRefresh) {
		return cur.keyPEM, cur.chainPEM, nil
	}
	if cur.pending == "" {
		name, signer, err := m.request(ctx, pod, src)
		if err != nil {
			return m.fallback(cur, now, err)
		}
		cur.pending, cur.pendingKey = name, signer
		m.update(key, func(e *entry) { e.pending, e.pendingKey = name, signer })
	}
	keyPEM, chainPEM, refresh, notAfter, err := m.await(ctx, pod.Namespace, cur.pending, cur.pendingKey)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			m.update(key, func(e *entry) { e.pending, e.pendingKey = "", nil })
		}
		return m.fallback(cur, now, err)
	}
	m.update(key, func(e *entry) {
		e.keyPEM, e.chainPEM, e.beginRefresh, e.notAfter = keyPEM, chainPEM, refresh, notAfter
		e.pending, e.pendingKey = "", nil
	})
	return keyPEM, chainPEM, nil
}

func (m *Manager) update(key string, f func(*entry)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		f(e)
	}
}

// fallback keeps a running pod on its current certificate while a
// refresh is pending or refused, as long as it has not expired.
func (m *Manager) fallback(cur entry, now time.Time, err error) ([]byte, []byte, error) {
	if cur.keyPEM != nil && now.Before(cur.notAfter) {
		m.cfg.Logger.Warn("pod certificate refresh not done; keeping the current certificate", "err", err)
		return cur.keyPEM, cur.chainPEM, nil
	}
	return nil, nil, err
}

// request makes a key and sends its PodCertificateRequest.
func (m *Manager) request(ctx context.Context, pod *corev1.Pod, src *corev1.PodCertificateProjection) (string, crypto.Signer, error) {
	signer, err := GenerateKey(src.KeyType)
	if err != nil {
		return "", nil, err
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, signer)
	if err != nil {
		return "", nil, fmt.Errorf("make certificate request: %w", err)
	}
	node, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("get node %s: %w", m.cfg.NodeName, err)
	}
	saName := pod.Spec.ServiceAccountName
	sa, err := m.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, saName, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("get service account %s/%s: %w", pod.Namespace, saName, err)
	}
	maxSeconds := int32(defaultMaxExpirationSeconds)
	if src.MaxExpirationSeconds != nil {
		maxSeconds = *src.MaxExpirationSeconds
	}
	req := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + "-", Namespace: pod.Namespace,
			// Deleted with the pod by the garbage collector.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: src.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: saName, ServiceAccountUID: sa.UID,
			NodeName: types.NodeName(m.cfg.NodeName), NodeUID: node.UID,
			MaxExpirationSeconds: &maxSeconds, StubPKCS10Request: stub,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	}
	created, err := m.cfg.Client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("create PodCertificateRequest for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return created.Name, signer, nil
}

// await polls the request until it is issued, refused, or Wait passes.
func (m *Manager) await(ctx context.Context, ns, name string, signer crypto.Signer) (keyPEM, chainPEM []byte, refresh, notAfter time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Wait)
	defer cancel()
	t := time.NewTicker(m.cfg.Poll)
	defer t.Stop()
	for {
		r, gerr := m.cfg.Client.CertificatesV1().PodCertificateRequests(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case gerr == nil:
			if done, err := outcome(r); done {
				if err != nil {
					return nil, nil, time.Time{}, time.Time{}, err
				}
				return credentials(r, signer)
			}
		case ctx.Err() == nil:
			m.cfg.Logger.Warn("read PodCertificateRequest", "request", ns+"/"+name, "err", gerr)
		}
		select {
		case <-ctx.Done():
			return nil, nil, time.Time{}, time.Time{}, fmt.Errorf("%w: request %s/%s", ErrPending, ns, name)
		case <-t.C:
		}
	}
}

// outcome reports whether the signer answered, and the refusal if it did
// not issue.
func outcome(r *certificatesv1.PodCertificateRequest) (bool, error) {
	for _, c := range r.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			return true, nil
		case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			return true, fmt.Errorf("%w: %s %s: %s: %s", ErrRefused, r.Name, strings.ToLower(c.Type), c.Reason, c.Message)
		}
	}
	return false, nil
}

// credentials encodes the key and the issued chain (certificate blocks
// only, re-encoded: headers and text between blocks are dropped).
func credentials(r *certificatesv1.PodCertificateRequest, signer crypto.Signer) (keyPEM, chainPEM []byte, refresh, notAfter time.Time, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(signer)
	if err != nil {
		return nil, nil, time.Time{}, time.Time{}, fmt.Errorf("encode private key: %w", err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	rest := []byte(r.Status.CertificateChain)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chainPEM = append(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
		}
	}
	if len(chainPEM) == 0 {
		return nil, nil, time.Time{}, time.Time{}, fmt.Errorf("%w: %s issued without a certificate", ErrRefused, r.Name)
	}
	if r.Status.BeginRefreshAt != nil {
		refresh = r.Status.BeginRefreshAt.Time
	}
	if r.Status.NotAfter != nil {
		notAfter = r.Status.NotAfter.Time
	}
	return keyPEM, chainPEM, refresh, notAfter, nil
}

// GenerateKey makes a private key of a podCertificate keyType.
func GenerateKey(keyType string) (crypto.Signer, error) {
	switch keyType {
	case "RSA3072":
		return rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unsupported key type %q", keyType)
}
