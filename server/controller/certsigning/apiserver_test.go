package certsigning

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"skiff/server/controller/controllertest"
)

// start runs the controller with authority until the test ends.
func start(t *testing.T, client kubernetes.Interface, authority *ca, cfg Config) {
	t.Helper()
	cfg.Client, cfg.Informers, cfg.CACert, cfg.CAKey = client, controllertest.Informers(t, client), authority.cert, authority.key
	cfg.Logger = controllertest.Logger(t, slog.LevelInfo)
	cfg.Recorder = controllertest.APIRecorder(t, client, "csrsigning")
	controllertest.Run(t, context.Background(), func(ctx context.Context) error { return Run(ctx, cfg) })
}

func createCSR(t *testing.T, client kubernetes.Interface, name, signer, username string, tmpl *x509.CertificateRequest, usages []certv1.KeyUsage, expiration time.Duration) {
	t.Helper()
	csr := &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certv1.CertificateSigningRequestSpec{
		Request: request(t, tmpl), SignerName: signer, Usages: usages, Username: username}}
	if expiration > 0 {
		s := int32(expiration / time.Second)
		csr.Spec.ExpirationSeconds = &s
	}
	if _, err := client.CertificatesV1().CertificateSigningRequests().Create(t.Context(), csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// decide approves or denies a CSR as a person with kubectl certificate
// approve/deny does: a condition written through the approval subresource.
func decide(t *testing.T, client kubernetes.Interface, name string, ty certv1.RequestConditionType) {
	t.Helper()
	csrs := client.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{Type: ty, Status: corev1.ConditionTrue, Reason: "ByTest", Message: "decided by the test"})
	got, err := csrs.UpdateApproval(t.Context(), name, csr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) == 0 {
		t.Fatalf("approval subresource dropped the %s condition", ty)
	}
}

// waitCSR waits for the CSR to satisfy cond.
func waitCSR(t *testing.T, client kubernetes.Interface, name, what string, cond func(*certv1.CertificateSigningRequest) bool) *certv1.CertificateSigningRequest {
	t.Helper()
	var got *certv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		csr, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = csr
		return cond(csr), nil
	})
	if err != nil {
		t.Fatalf("CSR %s: waiting for %s: %v (status %+v)", name, what, err, got.Status)
	}
	return got
}

func issued(csr *certv1.CertificateSigningRequest) bool { return len(csr.Status.Certificate) > 0 }

// verify checks the issued certificate chains to the CA for the usage.
func verify(t *testing.T, csr *certv1.CertificateSigningRequest, authority *ca, usage x509.ExtKeyUsage, dnsName string) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(csr.Status.Certificate)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("CSR %s: status.certificate is not one PEM certificate", csr.Name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(authority.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: dnsName}); err != nil {
		t.Errorf("CSR %s: certificate does not verify for %v: %v", csr.Name, usage, err)
	}
	return cert
}

func waitEvent(t *testing.T, client kubernetes.Interface, csr, reason string) corev1.Event {
	t.Helper()
	var got corev1.Event
	controllertest.Eventually(t, t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + csr + ",reason=" + reason})
		if err != nil || len(evs.Items) == 0 {
			return false, err
		}
		got = evs.Items[0]
		return true, nil
	}, "a %s event about CSR %s", reason, csr)
	return got
}

func TestCertSigning_AgainstAPIServer_ApprovedSignedNonConformingFailed(t *testing.T) {
	client := controllertest.Start(t, controllertest.Options{Namespaces: []string{metav1.NamespaceDefault}}).Client
	authority := testCA(t, time.Now().Add(10*365*24*time.Hour))
	// Pending and denied requests are never signed; created first, they
	// are looked at before the ones waited for below.
	createCSR(t, client, "pending", certv1.KubeAPIServerClientSignerName, "alice", &x509.CertificateRequest{Subject: subject("alice")}, clientUsages, 0)
	createCSR(t, client, "denied", certv1.KubeAPIServerClientSignerName, "alice", &x509.CertificateRequest{Subject: subject("alice")}, clientUsages, 0)
	decide(t, client, "denied", certv1.CertificateDenied)
	createCSR(t, client, "other-signer", "example.com/signer", "alice", &x509.CertificateRequest{Subject: subject("alice")}, clientUsages, 0)
	decide(t, client, "other-signer", certv1.CertificateApproved)
	start(t, client, authority, Config{})

	createCSR(t, client, "alice", certv1.KubeAPIServerClientSignerName, "alice", &x509.CertificateRequest{Subject: subject("alice", "devs")}, clientUsages, time.Hour)
	createCSR(t, client, "serving", certv1.KubeletServingSignerName, "system:node:n1",
		&x509.CertificateRequest{Subject: subject("system:node:n1", "system:nodes"), DNSNames: []string{"n1.example"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}}, servingUsages, 0)
	createCSR(t, client, "masters", certv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", &x509.CertificateRequest{Subject: subject("system:node:n1", "system:masters")}, clientUsages, 0)
	for _, n := range []string{"alice", "serving", "masters"} {
		decide(t, client, n, certv1.CertificateApproved)
	}

	before := time.Now()
	alice := waitCSR(t, client, "alice", "a certificate", issued)
	cert := verify(t, alice, authority, x509.ExtKeyUsageClientAuth, "")
	if cert.Subject.CommonName != "alice" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "devs" {
		t.Errorf("subject %v", cert.Subject)
	}
	if d := cert.NotAfter.Sub(before); d < 50*time.Minute || d > time.Hour+time.Minute {
		t.Errorf("certificate lives until %v, want the hour expirationSeconds asked for", cert.NotAfter)
	}
	if ev := waitEvent(t, client, "alice", ReasonCertificateIssued); ev.Type != corev1.EventTypeNormal {
		t.Errorf("CertificateIssued event type %s", ev.Type)
	}

	serving := waitCSR(t, client, "serving", "a certificate", issued)
	cert = verify(t, serving, authority, x509.ExtKeyUsageServerAuth, "n1.example")
	if d := cert.NotAfter.Sub(before); d < DefaultDuration-time.Hour || d > DefaultDuration {
		t.Errorf("certificate lives until %v, want the default year", cert.NotAfter)
	}
	if cert.KeyUsage&x509.KeyUsageCertSign != 0 || cert.IsCA {
		t.Error("a kubelet serving certificate can sign certificates")
	}

	masters := waitCSR(t, client, "masters", "the Failed condition", hasFailed)
	if issued(masters) {
		t.Error("a request breaking its signer's rules got a certificate")
	}
	for _, c := range masters.Status.Conditions {
		if c.Type == certv1.CertificateFailed && (c.Reason != ReasonSignerValidationFailure || c.Message != "subject organization is not system:nodes") {
			t.Errorf("Failed condition %s: %s", c.Reason, c.Message)
		}
	}
	if ev := waitEvent(t, client, "masters", ReasonSignerValidationFailure); ev.Type != corev1.EventTypeWarning {
		t.Errorf("SignerValidationFailure event type %s", ev.Type)
	}

	for _, n := range []string{"pending", "denied", "other-signer"} {
		csr, err := client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if issued(csr) || hasFailed(csr) {
			t.Errorf("CSR %s was acted on: %+v", n, csr.Status)
		}
	}
}

// The approver's decisions run against client-go's fake clientset, where a
// test can set spec.username freely; the real server sets it from the
// authenticated user (tested in server/apiserver).
func TestCertSigning_Approver_KubeletClientRequests(t *testing.T) {
	client := fake.NewClientset()
	authority := testCA(t, time.Now().Add(10*365*24*time.Hour))
	node := &x509.CertificateRequest{Subject: subject("system:node:n1", "system:nodes")}
	// Requests not to approve are there first, so they are looked at
	// before the ones waited for below.
	createCSR(t, client, "stranger", certv1.KubeAPIServerClientKubeletSignerName, "alice", node, clientUsages, 0)
	createCSR(t, client, "join-masters", certv1.KubeAPIServerClientKubeletSignerName, "system:join", &x509.CertificateRequest{Subject: subject("system:node:n1", "system:masters")}, clientUsages, 0)
	start(t, client, authority, Config{AutoApproveUsers: []string{"system:join"}})
	createCSR(t, client, "renewal", certv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", node, clientUsages, 0)
	createCSR(t, client, "join", certv1.KubeAPIServerClientKubeletSignerName, "system:join", node, clientUsages, 0)

	for _, n := range []string{"renewal", "join"} {
		csr := waitCSR(t, client, n, "approval and a certificate", issued)
		verify(t, csr, authority, x509.ExtKeyUsageClientAuth, "")
		if c := csr.Status.Conditions[0]; c.Type != certv1.CertificateApproved || c.Reason != ReasonAutoApproved || c.Status != corev1.ConditionTrue {
			t.Errorf("CSR %s: condition %+v", n, c)
		}
	}
	// The fake clientset has no event field selectors: look for the
	// approval among all events.
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "renewal" && e.Reason == ReasonAutoApproved && e.Message == "Auto approving self kubelet client certificate." {
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		t.Errorf("no AutoApproved event for the renewal: %v", err)
	}
	for _, n := range []string{"stranger", "join-masters"} {
		csr, err := client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(csr.Status.Conditions) != 0 || issued(csr) {
			t.Errorf("CSR %s was acted on: %+v", n, csr.Status)
		}
	}
}
