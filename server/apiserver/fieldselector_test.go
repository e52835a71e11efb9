package apiserver_test

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCSRList_BySignerName_SelectsThoseOfTheSigner(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	csrs := h.client.CertificatesV1().CertificateSigningRequests()
	for name, signer := range map[string]string{"client": certificatesv1.KubeAPIServerClientSignerName, "custom": "example.com/signer"} {
		_, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t, name), SignerName: signer,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	list, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/signer"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "custom" {
		t.Errorf("selected %d CSRs %v, want only custom", len(list.Items), list.Items)
	}
	if _, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.username=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unsupported field = %v, want 400", err)
	}
}
