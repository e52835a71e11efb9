package validation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func stubCSR(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestValidatePodCertificateRequest_Create(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	good, weak := stubCSR(t, p256), stubCSR(t, rsa2048)
	valid := func() *certificatesv1.PodCertificateRequest {
		max := int32(86400)
		return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
			Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/pods", PodName: "web", PodUID: "u1",
				ServiceAccountName: "default", ServiceAccountUID: "u2", NodeName: "n1", NodeUID: "u3",
				MaxExpirationSeconds: &max, StubPKCS10Request: good}}
	}
	set := func(v int32) func(*certificatesv1.PodCertificateRequest) {
		return func(r *certificatesv1.PodCertificateRequest) { r.Spec.MaxExpirationSeconds = &v }
	}
	runCreateCases(t, valid, []errCase[*certificatesv1.PodCertificateRequest]{
		{"lifetime under an hour", set(3599), field.ErrorTypeInvalid, "spec.maxExpirationSeconds", "[3600, 7862400]"},
		{"lifetime over 91 days", set(7862401), field.ErrorTypeInvalid, "spec.maxExpirationSeconds", ""},
		{"kubernetes.io signer over a day", func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.SignerName = "kubernetes.io/kube-apiserver-client-pod"
			set(86401)(r)
		}, field.ErrorTypeInvalid, "spec.maxExpirationSeconds", "[3600, 86400]"},
		{"no pod UID", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodUID = "" }, field.ErrorTypeInvalid, "spec.podUID", "must not be empty"},
		{"bad signer", func(r *certificatesv1.PodCertificateRequest) { r.Spec.SignerName = "pods" }, field.ErrorTypeInvalid, "spec.signerName", ""},
		{"RSA 2048 key", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = weak }, field.ErrorTypeInvalid, "spec.stubPKCS10Request", "3072 or 4096"},
		{"broken signature", func(r *certificatesv1.PodCertificateRequest) {
			b := append([]byte{}, good...)
			b[len(b)-3] ^= 0xff
			r.Spec.StubPKCS10Request = b
		}, field.ErrorTypeInvalid, "spec.stubPKCS10Request", ""},
		{"annotation key without domain", func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.UnverifiedUserAnnotations = map[string]string{"path": "x"}
		}, field.ErrorTypeInvalid, "spec.unverifiedUserAnnotations", ""},
	})
}

func TestValidatePod_CertificateProjections(t *testing.T) {
	withSource := func(src corev1.VolumeProjection) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "certs", VolumeSource: corev1.VolumeSource{
				Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{src}}}})
		}
	}
	str := func(s string) *string { return &s }
	cert := func(edit func(*corev1.PodCertificateProjection)) func(*corev1.Pod) {
		pc := &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ECDSAP256", CredentialBundlePath: "creds.pem"}
		edit(pc)
		return withSource(corev1.VolumeProjection{PodCertificate: pc})
	}
	lifetime := func(v int32) func(*corev1.PodCertificateProjection) {
		return func(pc *corev1.PodCertificateProjection) { pc.MaxExpirationSeconds = &v }
	}
	t.Run("valid projections pass", func(t *testing.T) {
		p := validPod()
		cert(lifetime(3600))(p)
		withSource(corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: str("example.com/pods"), Path: "ca.pem"}})(p)
		p.Spec.Volumes[len(p.Spec.Volumes)-1].Name = "ca"
		expectNoErrors(t, Validate(p))
	})
	runCreateCases(t, validPod, []errCase[*corev1.Pod]{
		{"certificate lifetime under an hour", cert(lifetime(3599)), field.ErrorTypeInvalid, "spec.volumes[1].projected.sources[0].podCertificate.maxExpirationSeconds", "if provided, maxExpirationSeconds must be >= 3600"},
		{"certificate lifetime over 91 days", cert(lifetime(7862401)), field.ErrorTypeInvalid, "spec.volumes[1].projected.sources[0].podCertificate.maxExpirationSeconds", "if provided, maxExpirationSeconds must be <= 7862400"},
		{"unknown key type", cert(func(pc *corev1.PodCertificateProjection) { pc.KeyType = "DSA" }), field.ErrorTypeNotSupported, "spec.volumes[1].projected.sources[0].podCertificate.keyType", ""},
		{"no output path", cert(func(pc *corev1.PodCertificateProjection) { pc.CredentialBundlePath = "" }), field.ErrorTypeRequired, "spec.volumes[1].projected.sources[0].podCertificate", ""},
		{"bundle by name and signer", withSource(corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: str("a"), SignerName: str("example.com/pods"), Path: "ca.pem"}}),
			field.ErrorTypeInvalid, "spec.volumes[1].projected.sources[0].clusterTrustBundle", "only one of name and signerName"},
		{"bundle by neither", withSource(corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca.pem"}}),
			field.ErrorTypeRequired, "spec.volumes[1].projected.sources[0].clusterTrustBundle", ""},
		{"bundle without path", withSource(corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: str("a")}}),
			field.ErrorTypeRequired, "spec.volumes[1].projected.sources[0].clusterTrustBundle.path", ""},
	})
}
