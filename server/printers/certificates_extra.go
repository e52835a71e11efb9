package printers

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

func clusterTrustBundlePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("SignerName", "string", certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"]),
		},
		Cells: func(obj runtime.Object, _ time.Time) ([]interface{}, error) {
			b, err := typed[certificatesv1.ClusterTrustBundle](obj)
			if err != nil {
				return nil, err
			}
			signer := b.Spec.SignerName
			if signer == "" {
				signer = "<none>"
			}
			return []interface{}{b.Name, signer}, nil
		},
	}
}

func podCertificateRequestPrinter() Printer {
	spec := certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("PodName", "string", spec["podName"]),
			column("ServiceAccountName", "string", spec["serviceAccountName"]),
			column("NodeName", "string", spec["nodeName"]),
			column("SignerName", "string", spec["signerName"]),
			column("State", "string", "Is the request Pending, Issued, Denied, or Failed?"),
			wideColumn("UnverifiedUserAnnotations", "string", spec["unverifiedUserAnnotations"]),
		},
		Cells: podCertificateRequestCells,
	}
}

func podCertificateRequestCells(obj runtime.Object, _ time.Time) ([]interface{}, error) {
	r, err := typed[certificatesv1.PodCertificateRequest](obj)
	if err != nil {
		return nil, err
	}
	state := "Pending"
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			state = c.Type
		}
	}
	return []interface{}{r.Name, r.Spec.PodName, r.Spec.ServiceAccountName, string(r.Spec.NodeName), r.Spec.SignerName, state,
		labels.FormatLabels(r.Spec.UnverifiedUserAnnotations)}, nil
}
