package registry

import certificatesv1 "k8s.io/api/certificates/v1"

// certExtraRows are the rows of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest.
// Signers and kubelets find their objects by field selector: bundles by
// spec.signerName, requests by signer (signers) and by node (kubelets).
func certExtraRows() []*Resource {
	return []*Resource{
		with(row[certificatesv1.ClusterTrustBundle, certificatesv1.ClusterTrustBundleList]("certificates.k8s.io", "v1", "clustertrustbundles", "clustertrustbundle", "ClusterTrustBundle", clusterScope),
			fields(clusterTrustBundleFields)),
		with(row[certificatesv1.PodCertificateRequest, certificatesv1.PodCertificateRequestList]("certificates.k8s.io", "v1", "podcertificaterequests", "podcertificaterequest", "PodCertificateRequest", nsScope),
			statusOnly, statusKeepsMeta, fields(podCertificateRequestFields)),
	}
}

func clusterTrustBundleFields(b *certificatesv1.ClusterTrustBundle) map[string]string {
	return map[string]string{"spec.signerName": b.Spec.SignerName}
}

func podCertificateRequestFields(r *certificatesv1.PodCertificateRequest) map[string]string {
	return map[string]string{
		"spec.signerName": r.Spec.SignerName,
		"spec.podName":    r.Spec.PodName,
		"spec.nodeName":   string(r.Spec.NodeName),
	}
}
