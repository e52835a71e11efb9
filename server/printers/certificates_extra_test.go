package printers

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTrustBundleAndPodCertificateCells(t *testing.T) {
	issued := &certificatesv1.PodCertificateRequest{ObjectMeta: objMeta("r", time.Hour),
		Spec: certificatesv1.PodCertificateRequestSpec{PodName: "web", ServiceAccountName: "sa", NodeName: "n1", SignerName: "example.com/pods",
			UnverifiedUserAnnotations: map[string]string{"example.com/a": "b"}},
		Status: certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue}}}}
	cases := []struct {
		name string
		gk   schema.GroupKind
		obj  runtime.Object
		want []interface{}
	}{
		{"bundle without signer", schema.GroupKind{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"},
			&certificatesv1.ClusterTrustBundle{ObjectMeta: objMeta("plain", time.Hour)}, []interface{}{"plain", "<none>"}},
		{"bundle of a signer", schema.GroupKind{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"},
			&certificatesv1.ClusterTrustBundle{ObjectMeta: objMeta("a:b:c", time.Hour), Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "a/b"}}, []interface{}{"a:b:c", "a/b"}},
		{"pending request", schema.GroupKind{Group: "certificates.k8s.io", Kind: "PodCertificateRequest"},
			&certificatesv1.PodCertificateRequest{ObjectMeta: objMeta("p", time.Hour)}, []interface{}{"p", "", "", "", "", "Pending", "<none>"}},
		{"issued request", schema.GroupKind{Group: "certificates.k8s.io", Kind: "PodCertificateRequest"},
			issued, []interface{}{"r", "web", "sa", "n1", "example.com/pods", "Issued", "example.com/a=b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := For(tc.gk)
			if !ok {
				t.Fatalf("no printer for %v", tc.gk)
			}
			rows, err := Rows(p, []runtime.Object{tc.obj}, testNow)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range rows[0].Cells {
				if c != tc.want[i] {
					t.Fatalf("cells = %v, want %v", rows[0].Cells, tc.want)
				}
			}
		})
	}
}
