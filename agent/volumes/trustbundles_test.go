package volumes

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func testCA(t *testing.T, cn string) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func bundleObj(name, signer, pemData string, lbls map[string]string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pemData}}
}

func ctbVolume(name string, srcs ...*corev1.ClusterTrustBundleProjection) corev1.Volume {
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}
	for _, s := range srcs {
		v.Projected.Sources = append(v.Projected.Sources, corev1.VolumeProjection{ClusterTrustBundle: s})
	}
	return v
}

func sp(s string) *string { return &s }

func TestSetup_ClusterTrustBundleSources_SelectAndCombine(t *testing.T) {
	a, b, c, d := testCA(t, "a"), testCA(t, "b"), testCA(t, "c"), testCA(t, "d")
	objs := []runtime.Object{
		bundleObj("example.com:one:1", "example.com/one", a, map[string]string{"alive": "true"}),
		bundleObj("example.com:one:2", "example.com/one", b+a, map[string]string{"alive": "true"}),
		bundleObj("example.com:one:3", "example.com/one", c, map[string]string{"alive": "false"}),
		bundleObj("example.com:two:1", "example.com/two", d, map[string]string{"alive": "true"}),
		bundleObj("plain", "", d, nil),
	}
	sorted := func(pems ...string) string {
		got := trustAnchors([]*certificatesv1.ClusterTrustBundle{bundleObj("x", "", strings.Join(pems, ""), nil)})
		return string(got)
	}
	cases := []struct {
		name string
		src  *corev1.ClusterTrustBundleProjection
		want string
		err  string
	}{
		{"by name", &corev1.ClusterTrustBundleProjection{Name: sp("plain"), Path: "ca.pem"}, d, ""},
		{"signer and selector, deduplicated", &corev1.ClusterTrustBundleProjection{SignerName: sp("example.com/one"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}, Path: "ca.pem"}, sorted(a, b), ""},
		{"empty selector takes every bundle of the signer", &corev1.ClusterTrustBundleProjection{SignerName: sp("example.com/one"),
			LabelSelector: &metav1.LabelSelector{}, Path: "ca.pem"}, sorted(a, b, c), ""},
		{"nil selector matches nothing: optional gives an empty file", &corev1.ClusterTrustBundleProjection{SignerName: sp("example.com/one"),
			Optional: bp(true), Path: "ca.pem"}, "", ""},
		{"missing name, optional: empty file", &corev1.ClusterTrustBundleProjection{Name: sp("nope"), Optional: bp(true), Path: "ca.pem"}, "", ""},
		{"missing name, required: error", &corev1.ClusterTrustBundleProjection{Name: sp("nope"), Optional: bp(false), Path: "ca.pem"}, "", "not found"},
		{"no match, required: error", &corev1.ClusterTrustBundleProjection{SignerName: sp("example.com/one"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "unknown"}}, Path: "ca.pem"}, "", "matched zero"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _, _ := newTestManager(t, objs...)
			pod := newPod(ctbVolume("ca", tc.src))
			vols, err := m.Setup(context.Background(), pod)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `MountVolume.SetUp failed for volume "ca"`) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(vols["ca"], "ca.pem")); got != tc.want {
				t.Fatalf("ca.pem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSetup_HundredsOfTrustBundles_OneList(t *testing.T) {
	var objs []runtime.Object
	var srcs []*corev1.ClusterTrustBundleProjection
	var vols []corev1.Volume
	for i := range 150 {
		name := fmt.Sprintf("example.com:many:%d", i)
		objs = append(objs, bundleObj(name, "example.com/many", testCA(t, name), nil))
		srcs = append(srcs, &corev1.ClusterTrustBundleProjection{Name: sp(name), Path: fmt.Sprintf("ca-%d.pem", i)})
		vols = append(vols, ctbVolume(fmt.Sprintf("v%d", i), srcs[i]))
	}
	m, cs, _ := newTestManager(t, objs...)
	pod := newPod(append(vols, ctbVolume("all", srcs...))...)
	got, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "clustertrustbundles" {
			calls++
		}
	}
	if calls != 1 {
		t.Fatalf("%d ClusterTrustBundle requests for 300 sources, want 1 list", calls)
	}
	want := objs[42].(*certificatesv1.ClusterTrustBundle).Spec.TrustBundle
	if a, b := readFile(t, filepath.Join(got["v42"], "ca-42.pem")), readFile(t, filepath.Join(got["all"], "ca-42.pem")); a != want || b != want {
		t.Fatalf("ca-42.pem differs from its bundle")
	}
}

// fakeCerts issues fixed credentials and records the requests.
type fakeCerts struct {
	keys    []string
	err     error
	forgot  []string
	signers []string
}

func (f *fakeCerts) Credentials(_ context.Context, pod *corev1.Pod, key string, src *corev1.PodCertificateProjection) ([]byte, []byte, error) {
	f.keys = append(f.keys, key)
	f.signers = append(f.signers, src.SignerName)
	if f.err != nil {
		return nil, nil, f.err
	}
	return []byte("KEY\n"), []byte("CHAIN\n"), nil
}
func (f *fakeCerts) Forget(uid string) { f.forgot = append(f.forgot, uid) }

func TestSetup_PodCertificateSource_WritesRequestedFiles(t *testing.T) {
	pc := &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ED25519",
		CredentialBundlePath: "creds.pem", KeyPath: "tls.key", CertificateChainPath: "tls.crt"}
	pod := newPod(corev1.Volume{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{PodCertificate: pc}}}}})
	m, _, _ := newTestManager(t)
	certs := &fakeCerts{}
	m.cfg.PodCertificates = certs
	vols, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"creds.pem": "KEY\nCHAIN\n", "tls.key": "KEY\n", "tls.crt": "CHAIN\n"} {
		if got := readFile(t, filepath.Join(vols["certs"], f)); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if len(certs.keys) != 1 || certs.keys[0] != "uid-1/certs/0" {
		t.Fatalf("credential keys = %v", certs.keys)
	}
	if err := m.Teardown(context.Background(), "uid-1"); err != nil {
		t.Fatal(err)
	}
	if len(certs.forgot) != 1 || certs.forgot[0] != "uid-1" {
		t.Fatalf("forgotten pods = %v, want [uid-1]", certs.forgot)
	}

	t.Run("not issued yet: the volume fails", func(t *testing.T) {
		m, _, _ := newTestManager(t)
		m.cfg.PodCertificates = &fakeCerts{err: errors.New("pending")}
		if _, err := m.Setup(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "pending") {
			t.Fatalf("err = %v, want the issuer's", err)
		}
	})
	t.Run("no issuer: unsupported", func(t *testing.T) {
		m, _, _ := newTestManager(t)
		if _, err := m.Setup(context.Background(), pod); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("err = %v, want ErrUnsupported", err)
		}
	})
}

func TestSetup_TrustBundleChanged_RefreshWritesNewAnchors(t *testing.T) {
	a, b := testCA(t, "a"), testCA(t, "b")
	m, cs, _ := newTestManager(t, bundleObj("plain", "", a, nil))
	pod := newPod(ctbVolume("ca", &corev1.ClusterTrustBundleProjection{Name: sp("plain"), Path: "ca.pem"}))
	ctx := context.Background()
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CertificatesV1().ClusterTrustBundles().Update(ctx, bundleObj("plain", "", b, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(vols["ca"], "ca.pem")); got != b {
		t.Fatalf("ca.pem after the bundle changed = %q, want the new anchor", got)
	}
}
