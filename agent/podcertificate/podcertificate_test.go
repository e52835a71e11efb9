package podcertificate

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// signer answers the requests the manager sends: each Get of a pending
// request issues (or denies) it, as a signer controller would between
// two polls.
type signer struct {
	mu      sync.Mutex
	t       *testing.T
	now     func() time.Time
	deny    bool
	created []*certificatesv1.PodCertificateRequest
	caKey   ed25519.PrivateKey
	ca      *x509.Certificate
}

func newSigner(t *testing.T, now func() time.Time) *signer {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), IsCA: true, BasicConstraintsValid: true,
		NotBefore: now().Add(-time.Hour), NotAfter: now().Add(365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &signer{t: t, now: now, caKey: key, ca: ca}
}

func (s *signer) install(cs *fake.Clientset) {
	cs.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest).DeepCopy()
		r.Name = fmt.Sprintf("%s%d", r.GenerateName, len(s.created))
		s.created = append(s.created, r)
		return true, r, nil
	})
	cs.PrependReactor("get", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		name := a.(k8stesting.GetAction).GetName()
		for _, r := range s.created {
			if r.Name == name {
				s.answer(r)
				return true, r.DeepCopy(), nil
			}
		}
		return true, nil, errors.New("not found")
	})
}

func (s *signer) answer(r *certificatesv1.PodCertificateRequest) {
	if len(r.Status.Conditions) > 0 {
		return
	}
	if s.deny {
		r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue, Reason: "No"}}
		return
	}
	req, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil || req.CheckSignature() != nil {
		s.t.Errorf("bad stub request: %v", err)
		return
	}
	nb := s.now().Truncate(time.Second)
	na := nb.Add(time.Duration(*r.Spec.MaxExpirationSeconds) * time.Second)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(int64(len(s.created) + 1)), NotBefore: nb, NotAfter: na}, s.ca, req.PublicKey, s.caKey)
	if err != nil {
		s.t.Error(err)
		return
	}
	r.Status.CertificateChain = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"x": "y"}, Bytes: der}))
	r.Status.NotBefore, r.Status.NotAfter = &metav1.Time{Time: nb}, &metav1.Time{Time: na}
	r.Status.BeginRefreshAt = &metav1.Time{Time: na.Add(-30 * time.Minute)}
	r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "OK"}}
}

func (s *signer) requests() []*certificatesv1.PodCertificateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*certificatesv1.PodCertificateRequest(nil), s.created...)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func setup(t *testing.T) (*Manager, *signer, *clock, *corev1.Pod) {
	t.Helper()
	clk := &clock{t: time.Now()}
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa1", Namespace: "ns1", UID: "sa-uid"}},
	)
	s := newSigner(t, clk.Now)
	s.install(cs)
	m := New(Config{Client: cs, NodeName: "n1", Now: clk.Now, Wait: 2 * time.Second, Poll: time.Millisecond})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: "pod-uid"},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa1"}}
	return m, s, clk, pod
}

func TestCredentials_IssuedRequest_KeyMatchesChain(t *testing.T) {
	for _, kt := range []string{"ECDSAP256", "ED25519", "RSA3072"} {
		t.Run(kt, func(t *testing.T) {
			m, s, _, pod := setup(t)
			hour := int32(3600)
			src := &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: kt, MaxExpirationSeconds: &hour,
				UserAnnotations: map[string]string{"example.com/path": "/x"}}
			keyPEM, chainPEM, err := m.Credentials(context.Background(), pod, "pod-uid/v/0", src)
			if err != nil {
				t.Fatal(err)
			}
			reqs := s.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			sp := reqs[0].Spec
			if sp.PodUID != "pod-uid" || sp.NodeUID != "node-uid" || sp.ServiceAccountUID != "sa-uid" || string(sp.NodeName) != "n1" ||
				*sp.MaxExpirationSeconds != 3600 || sp.UnverifiedUserAnnotations["example.com/path"] != "/x" {
				t.Fatalf("request spec = %+v", sp)
			}
			if o := reqs[0].OwnerReferences; len(o) != 1 || o[0].UID != "pod-uid" {
				t.Fatalf("owner references = %v, want the pod", o)
			}
			kb, _ := pem.Decode(keyPEM)
			key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			cb, _ := pem.Decode(chainPEM)
			if len(cb.Headers) != 0 {
				t.Fatalf("chain kept PEM headers")
			}
			cert, err := x509.ParseCertificate(cb.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(cert.PublicKey) {
				t.Fatalf("certificate is not for the written key")
			}
		})
	}
}

func TestCredentials_BeforeAndAfterBeginRefresh_RequestsAgainOnlyAfter(t *testing.T) {
	m, s, clk, pod := setup(t)
	src := &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ED25519"}
	ctx := context.Background()
	first, _, err := m.Credentials(ctx, pod, "k", src)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(23 * time.Hour) // before beginRefreshAt (24h - 30m)
	again, _, err := m.Credentials(ctx, pod, "k", src)
	if err != nil || string(again) != string(first) || len(s.requests()) != 1 {
		t.Fatalf("before refresh: err %v, same key %v, %d requests", err, string(again) == string(first), len(s.requests()))
	}
	clk.Add(time.Hour)
	renewed, _, err := m.Credentials(ctx, pod, "k", src)
	if err != nil || string(renewed) == string(first) || len(s.requests()) != 2 {
		t.Fatalf("after refresh: err %v, new key %v, %d requests", err, string(renewed) != string(first), len(s.requests()))
	}
	m.Forget("pod-uid")
	if _, _, err := m.Credentials(ctx, pod, "k", src); err != nil || len(s.requests()) != 3 {
		t.Fatalf("after Forget: err %v, %d requests, want a new one", err, len(s.requests()))
	}
}

func TestCredentials_Denied_ReturnsRefusedThenAsksAgain(t *testing.T) {
	m, s, _, pod := setup(t)
	s.deny = true
	src := &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ECDSAP384"}
	if _, _, err := m.Credentials(context.Background(), pod, "k", src); !errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	s.mu.Lock()
	s.deny = false
	s.mu.Unlock()
	if _, _, err := m.Credentials(context.Background(), pod, "k", src); err != nil || len(s.requests()) != 2 {
		t.Fatalf("retry: err %v, %d requests", err, len(s.requests()))
	}
}

func TestCredentials_NoAnswer_Pending(t *testing.T) {
	clk := &clock{t: time.Now()}
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa1", Namespace: "ns1", UID: "sa-uid"}},
	)
	cs.PrependReactor("create", "podcertificaterequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest).DeepCopy()
		r.Name = "r"
		return false, r, nil
	})
	m := New(Config{Client: cs, NodeName: "n1", Now: clk.Now, Wait: 20 * time.Millisecond, Poll: time.Millisecond})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: "pod-uid"}, Spec: corev1.PodSpec{ServiceAccountName: "sa1"}}
	_, _, err := m.Credentials(context.Background(), pod, "k", &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ED25519"})
	if !errors.Is(err, ErrPending) {
		t.Fatalf("err = %v, want ErrPending", err)
	}
}
