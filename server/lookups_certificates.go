package server

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// CertificateNode implements admission.PodCertificateLookups.
func (l *objectLookups) CertificateNode(ctx context.Context, name string) (*corev1.Node, error) {
	return get[corev1.Node](l, "", "nodes", "", name), nil
}

// CertificatePod implements admission.PodCertificateLookups.
func (l *objectLookups) CertificatePod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return get[corev1.Pod](l, "", "pods", namespace, name), nil
}

// CertificateSync implements admission.PodCertificateLookups: the watch
// cache may lag the pod a kubelet just saw.
func (l *objectLookups) CertificateSync(ctx context.Context) error {
	return l.st.Cache().WaitCurrent(ctx)
}
