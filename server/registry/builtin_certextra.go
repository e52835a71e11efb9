package registry

// certExtraRows are the rows of certificates.k8s.io/v1 ClusterTrustBundle and PodCertificateRequest.
func certExtraRows() []*Resource {
	return nil
}
