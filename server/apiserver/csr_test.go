package apiserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func csrPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestCSR_WritesSplitByStrategy(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	csrs := h.client.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "req"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: csrPEM(t, "alice"), SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages:   []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
			Username: "system:node:forged", Groups: []string{"system:nodes"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if csr.Spec.Username != "admin" || len(csr.Spec.Groups) != 2 {
		t.Errorf("requester = %q %v, want the authenticated user (admin), not what the client claimed", csr.Spec.Username, csr.Spec.Groups)
	}

	// /status may not approve.
	sneaky := csr.DeepCopy()
	sneaky.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Sneaky"}}
	got, err := csrs.UpdateStatus(ctx, sneaky, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasCondition(got, certificatesv1.CertificateApproved) {
		t.Error("an approval written through /status was kept")
	}

	// /approval approves, and the approval persists; metadata is taken
	// from the request (as upstream's approval strategy), the rest of the
	// status is not.
	approve := got.DeepCopy()
	approve.Status.Conditions = append(approve.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove"})
	approve.Annotations = map[string]string{"approved-by": "test"}
	approve.Status.Certificate = []byte("not through /approval")
	if _, err := csrs.UpdateApproval(ctx, "req", approve, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = csrs.Get(ctx, "req", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCondition(got, certificatesv1.CertificateApproved) || got.Status.Conditions[0].LastUpdateTime.IsZero() {
		t.Fatalf("approval not stored (or not stamped): %+v", got.Status.Conditions)
	}
	if got.Annotations["approved-by"] != "test" || len(got.Status.Certificate) != 0 {
		t.Fatalf("after /approval: annotations %v, certificate %q; want the annotation taken, the certificate not", got.Annotations, got.Status.Certificate)
	}

	// A plain update changes neither spec nor status.
	plain := got.DeepCopy()
	plain.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}
	plain.Status.Conditions = nil
	plain.Labels = map[string]string{"x": "y"}
	after, err := csrs.Update(ctx, plain, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Labels["x"] != "y" || after.Spec.Usages[0] != certificatesv1.UsageClientAuth || !hasCondition(after, certificatesv1.CertificateApproved) {
		t.Errorf("plain update: labels %v usages %v conditions %v; want labels changed only", after.Labels, after.Spec.Usages, after.Status.Conditions)
	}

	// An approval cannot be taken back, nor turned into a denial as well.
	for name, conds := range map[string][]certificatesv1.CertificateSigningRequestCondition{
		"removed": nil,
		"both":    append(after.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}),
	} {
		bad := after.DeepCopy()
		bad.Status.Conditions = conds
		if _, err := csrs.UpdateApproval(ctx, "req", bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want 422", name, err)
		}
	}
}
