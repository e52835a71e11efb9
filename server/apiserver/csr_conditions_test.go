package apiserver

import (
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestCSRStatusConditions_ApprovalsKeptInTheirPlaces(t *testing.T) {
	c := func(t certificatesv1.RequestConditionType, reason string) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason}
	}
	stored := []certificatesv1.CertificateSigningRequestCondition{c("Patched", "a"), c(certificatesv1.CertificateApproved, "admin")}
	for _, tc := range []struct {
		name string
		req  []certificatesv1.CertificateSigningRequestCondition
		want []string // type/reason
	}{
		{"condition appended after the approval keeps the order",
			[]certificatesv1.CertificateSigningRequestCondition{c("Patched", "a"), c(certificatesv1.CertificateApproved, "forged"), c("StatusUpdate", "b")},
			[]string{"Patched/a", "Approved/admin", "StatusUpdate/b"}},
		{"an added approval is not taken",
			[]certificatesv1.CertificateSigningRequestCondition{c("Patched", "a"), c(certificatesv1.CertificateApproved, "admin"), c(certificatesv1.CertificateDenied, "x")},
			[]string{"Patched/a", "Approved/admin"}},
		{"a removed approval stays",
			[]certificatesv1.CertificateSigningRequestCondition{c("Patched", "a")},
			[]string{"Patched/a", "Approved/admin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, x := range statusConditions(tc.req, stored) {
				got = append(got, string(x.Type)+"/"+x.Reason)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("conditions %v, want %v", got, tc.want)
			}
		})
	}
}
