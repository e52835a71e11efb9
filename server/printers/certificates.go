package printers

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

func certificateSigningRequestPrinter() Printer {
	spec := certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			ageColumn(),
			column("SignerName", "string", spec["signerName"]),
			column("Requestor", "string", spec["request"]),
			column("RequestedDuration", "string", spec["expirationSeconds"]),
			column("Condition", "string", certificatesv1beta1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]),
		},
		Cells: certificateSigningRequestCells,
	}
}

func certificateSigningRequestCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	csr, err := typed[certificatesv1.CertificateSigningRequest](obj)
	if err != nil {
		return nil, err
	}
	signer := csr.Spec.SignerName
	if signer == "" {
		signer = "<none>"
	}
	requested := "<none>"
	if s := csr.Spec.ExpirationSeconds; s != nil {
		requested = duration.HumanDuration(time.Duration(*s) * time.Second)
	}
	return []interface{}{
		csr.Name,
		translateTimestampSince(csr.CreationTimestamp, now),
		signer,
		csr.Spec.Username,
		requested,
		csrCondition(csr),
	}, nil
}

// csrCondition is Denied, Approved or Pending, then ",Failed" and ",Issued"
// when they apply.
func csrCondition(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	if denied {
		status = "Denied"
	} else if approved {
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}
