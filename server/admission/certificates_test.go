package admission_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"skiff/server/admission"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
	"skiff/store"
)

// signerGrants allows user to act as the signer names listed for a verb.
type signerGrants map[string]map[string][]string // user -> verb -> signer names

func (g signerGrants) Authorize(_ context.Context, a auth.Attributes) (bool, string, error) {
	if a.Resource != "signers" || a.APIGroup != "certificates.k8s.io" {
		return false, "", nil
	}
	for _, n := range g[a.User.Name][a.Verb] {
		if n == a.Name {
			return true, "", nil
		}
	}
	return false, "", nil
}

// certLookups reads the test server's store.
type certLookups struct{ srv **apitest.Server }

func getObj[T any](ctx context.Context, s *apitest.Server, group, resource, ns, name string) *T {
	res, _ := s.Registry.Lookup(group, "v1", resource)
	e, err := s.Storage.Get(ctx, res, ns, name)
	if err != nil {
		return nil
	}
	t, _ := any(e.Obj).(*T)
	return t
}

func (l certLookups) ServiceAccount(ctx context.Context, ns, name string) *corev1.ServiceAccount {
	return getObj[corev1.ServiceAccount](ctx, *l.srv, "", "serviceaccounts", ns, name)
}
func (l certLookups) CertificateNode(ctx context.Context, name string) (*corev1.Node, error) {
	return getObj[corev1.Node](ctx, *l.srv, "", "nodes", "", name), nil
}
func (l certLookups) CertificatePod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return getObj[corev1.Pod](ctx, *l.srv, "", "pods", ns, name), nil
}
func (l certLookups) CertificateSync(context.Context) error { return nil }

type certServer struct {
	srv   *apitest.Server
	admin kubernetes.Interface
}

func (s certServer) as(name string, groups ...string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(s.srv.Config(&auth.User{Name: name, Groups: append(groups, auth.GroupAuthenticated)}))
}

func startCertificates(t *testing.T, grants signerGrants) certServer {
	t.Helper()
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Admission: func(store.Store) []apiserver.Admitter {
		return []apiserver.Admitter{admission.Certificates{Authorizer: grants, Get: certLookups{&srv}}}
	}})
	s := certServer{srv: srv}
	s.admin = s.as("admin")
	if _, err := s.admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

func caPEM(t *testing.T, cn string) string {
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

func ctb(name, signer, bundle string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
}

func TestCertificates_TrustBundleSigner_NeedsAttest(t *testing.T) {
	s := startCertificates(t, signerGrants{
		"admin": {"attest": {"example.com/*"}},
		"alice": {"attest": {"example.com/one"}},
	})
	ctx := context.Background()
	bundle := caPEM(t, "root")
	cases := []struct {
		name, user string
		obj        *certificatesv1.ClusterTrustBundle
		forbidden  bool
	}{
		{"wildcard grant on the domain", "admin", ctb("example.com:one:a", "example.com/one", bundle), false},
		{"grant on the signer itself", "alice", ctb("example.com:one:b", "example.com/one", bundle), false},
		{"no grant on another signer", "alice", ctb("example.com:two:a", "example.com/two", bundle), true},
		{"no grant at all", "mallory", ctb("example.com:one:c", "example.com/one", bundle), true},
		{"bundle without signer needs none", "mallory", ctb("plain", "", bundle), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.as(tc.user).CertificatesV1().ClusterTrustBundles().Create(ctx, tc.obj, metav1.CreateOptions{})
			if tc.forbidden != apierrors.IsForbidden(err) || (!tc.forbidden && err != nil) {
				t.Fatalf("create as %s: err = %v, want forbidden %v", tc.user, err, tc.forbidden)
			}
		})
	}
	// Updating a bundle's content is a new attestation too.
	cur, err := s.admin.CertificatesV1().ClusterTrustBundles().Get(ctx, "example.com:one:a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.TrustBundle = caPEM(t, "other")
	if _, err := s.as("mallory").CertificatesV1().ClusterTrustBundles().Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("update by mallory: err = %v, want forbidden", err)
	}
}

func TestCertificates_TrustBundles_ValidatedAndSelectableBySigner(t *testing.T) {
	s := startCertificates(t, signerGrants{"admin": {"attest": {"example.com/*"}}})
	ctx := context.Background()
	c := s.admin.CertificatesV1().ClusterTrustBundles()
	bundle := caPEM(t, "root")
	invalid := []struct {
		name  string
		obj   *certificatesv1.ClusterTrustBundle
		field string
	}{
		{"signer bundle without the signer prefix", ctb("one-a", "example.com/one", bundle), "metadata.name"},
		{"colon in a bundle without signer", ctb("a:b", "", bundle), "metadata.name"},
		{"empty bundle", ctb("empty", "", ""), "spec.trustBundle"},
		{"duplicate anchors", ctb("dup", "", bundle+bundle), "spec.trustBundle"},
		{"not a certificate block", ctb("key", "", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))), "spec.trustBundle"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Create(ctx, tc.obj, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v, want invalid", err)
			}
			st := err.(apierrors.APIStatus).Status()
			if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != tc.field {
				t.Fatalf("causes = %+v, want field %s", st.Details, tc.field)
			}
		})
	}
	for _, b := range []*certificatesv1.ClusterTrustBundle{ctb("example.com:one:a", "example.com/one", bundle), ctb("example.com:two:a", "example.com/two", caPEM(t, "two")), ctb("plain", "", bundle)} {
		if _, err := c.Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/one"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "example.com:one:a" {
		t.Fatalf("field-selected list = %v", list.Items)
	}
	cur := &list.Items[0]
	cur.Spec.SignerName = "example.com/two"
	if _, err := c.Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing signerName: err = %v, want invalid", err)
	}
}

// stubRequest is a kubelet-style empty PKCS#10 request for a new key.
func stubRequest(t *testing.T) (crypto.Signer, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func pcr(name, node string, req []byte) *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns1"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/pods", PodName: "web", PodUID: "pod-uid",
			ServiceAccountName: "default", ServiceAccountUID: "sa-uid", NodeName: types.NodeName(node), NodeUID: "node-uid",
			StubPKCS10Request: req}}
}

// issue fills r's status as a signer would, with a certificate for pub.
func issue(t *testing.T, r *certificatesv1.PodCertificateRequest, pub crypto.PublicKey, lifetime time.Duration) {
	t.Helper()
	_, caKey, _ := ed25519.GenerateKey(rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), IsCA: true, BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	nb := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: nb, NotAfter: nb.Add(lifetime)}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	r.Status = certificatesv1.PodCertificateRequestStatus{
		CertificateChain: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		NotBefore:        &metav1.Time{Time: nb}, NotAfter: &metav1.Time{Time: nb.Add(lifetime)},
		BeginRefreshAt: &metav1.Time{Time: nb.Add(lifetime / 2)},
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "ok", LastTransitionTime: metav1.Now()}},
	}
}

func TestCertificates_PodCertificateRequestStatus_NeedsSignAndIsFinal(t *testing.T) {
	s := startCertificates(t, signerGrants{"signer": {"sign": {"example.com/pods"}}})
	ctx := context.Background()
	key, req := stubRequest(t)
	created, err := s.admin.CertificatesV1().PodCertificateRequests("ns1").Create(ctx, pcr("r1", "n1", req), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := created.Spec.MaxExpirationSeconds; m == nil || *m != 86400 {
		t.Fatalf("maxExpirationSeconds = %v, want the default 86400", m)
	}
	issue(t, created, key.Public(), time.Hour)
	if _, err := s.as("mallory").CertificatesV1().PodCertificateRequests("ns1").UpdateStatus(ctx, created, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("status by a non-signer: err = %v, want forbidden", err)
	}
	tooLong := created.DeepCopy()
	issue(t, tooLong, key.Public(), 48*time.Hour)
	if _, err := s.as("signer").CertificatesV1().PodCertificateRequests("ns1").UpdateStatus(ctx, tooLong, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("lifetime over maxExpirationSeconds: err = %v, want invalid", err)
	}
	otherKey, _ := stubRequest(t)
	wrongKey := created.DeepCopy()
	issue(t, wrongKey, otherKey.Public(), time.Hour)
	if _, err := s.as("signer").CertificatesV1().PodCertificateRequests("ns1").UpdateStatus(ctx, wrongKey, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("certificate for another key: err = %v, want invalid", err)
	}
	issued, err := s.as("signer").CertificatesV1().PodCertificateRequests("ns1").UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	issued.Status.Conditions[0].Message = "changed"
	if _, err := s.as("signer").CertificatesV1().PodCertificateRequests("ns1").UpdateStatus(ctx, issued, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing an issued status: err = %v, want invalid", err)
	}
	issued.Status.Conditions[0].Message = "ok"
	issued.Spec.PodName = "other"
	if _, err := s.admin.CertificatesV1().PodCertificateRequests("ns1").Update(ctx, issued, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing the spec: err = %v, want invalid", err)
	}
}

func TestCertificates_PodCertificateRequestFromNode_MustMatchItsPod(t *testing.T) {
	s := startCertificates(t, signerGrants{})
	ctx := context.Background()
	for _, n := range []string{"n1", "n2"} {
		if _, err := s.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sa, err := s.admin.CoreV1().ServiceAccounts("ns1").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1"}, Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "default",
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ECDSAP256", CredentialBundlePath: "creds.pem"}}}}}}}}}
	pod, err = s.admin.CoreV1().Pods("ns1").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := s.admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n2, _ := s.admin.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	_, req := stubRequest(t)
	good := func(edit func(r *certificatesv1.PodCertificateRequest)) *certificatesv1.PodCertificateRequest {
		r := pcr("", "n1", req)
		r.GenerateName = "r-"
		r.Spec.PodUID, r.Spec.ServiceAccountUID, r.Spec.NodeUID = pod.UID, sa.UID, n1.UID
		if edit != nil {
			edit(r)
		}
		return r
	}
	cases := []struct {
		name, node string
		obj        *certificatesv1.PodCertificateRequest
		allowed    bool
	}{
		{"its own pod", "n1", good(nil), true},
		{"another node's pod", "n2", good(func(r *certificatesv1.PodCertificateRequest) { r.Spec.NodeName, r.Spec.NodeUID = "n2", n2.UID }), false},
		{"in another node's name", "n2", good(nil), false},
		{"a wrong pod UID", "n1", good(func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodUID = "forged" }), false},
		{"a wrong service account UID", "n1", good(func(r *certificatesv1.PodCertificateRequest) { r.Spec.ServiceAccountUID = "forged" }), false},
		{"a signer the pod does not use", "n1", good(func(r *certificatesv1.PodCertificateRequest) { r.Spec.SignerName = "example.com/other" }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := s.as("system:node:"+tc.node, auth.GroupNodes)
			_, err := c.CertificatesV1().PodCertificateRequests("ns1").Create(ctx, tc.obj, metav1.CreateOptions{})
			if tc.allowed && err != nil || !tc.allowed && !apierrors.IsForbidden(err) {
				t.Fatalf("err = %v, want allowed %v", err, tc.allowed)
			}
		})
	}
}

// TestCertificates_ApplyPatches_ServeBothKinds patches as the conformance
// CRUD tests do: server-side apply of a bundle's spec and of a request's
// status.
func TestCertificates_ApplyPatches_ServeBothKinds(t *testing.T) {
	s := startCertificates(t, signerGrants{"admin": {"sign": {"example.com/pods"}}})
	ctx := context.Background()
	if _, err := s.admin.CertificatesV1().ClusterTrustBundles().Create(ctx, ctb("plain", "", caPEM(t, "a")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	next := caPEM(t, "b")
	body, _ := json.Marshal(map[string]any{"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle",
		"metadata": map[string]any{"name": "plain"}, "spec": map[string]any{"trustBundle": next}})
	force := true
	got, err := s.admin.CertificatesV1().ClusterTrustBundles().Patch(ctx, "plain", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "test", Force: &force})
	if err != nil || got.Spec.TrustBundle != next {
		t.Fatalf("apply bundle: %v (bundle updated: %v)", err, got != nil && got.Spec.TrustBundle == next)
	}
	key, req := stubRequest(t)
	r, err := s.admin.CertificatesV1().PodCertificateRequests("ns1").Create(ctx, pcr("r1", "n1", req), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	issue(t, r, key.Public(), time.Hour)
	body, _ = json.Marshal(map[string]any{"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest",
		"metadata": map[string]any{"name": "r1", "namespace": "ns1"}, "status": r.Status})
	got2, err := s.admin.CertificatesV1().PodCertificateRequests("ns1").Patch(ctx, "r1", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "test", Force: &force}, "status")
	if err != nil || got2.Status.CertificateChain != r.Status.CertificateChain {
		t.Fatalf("apply status: %v", err)
	}
}
