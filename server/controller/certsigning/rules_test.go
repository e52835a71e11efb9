package certsigning

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// testCA makes a self-signed CA valid until notAfter.
func testCA(t *testing.T, notAfter time.Time) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{cert: cert, key: key}
}

// request makes a certificate request with a fresh key, in PEM.
func request(t *testing.T, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func parsed(t *testing.T, tmpl *x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	req, err := parseRequest(request(t, tmpl))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func subject(cn string, orgs ...string) pkix.Name {
	return pkix.Name{CommonName: cn, Organization: orgs}
}

var (
	clientUsages  = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
	servingUsages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	u             = func(us ...certv1.KeyUsage) []certv1.KeyUsage { return us }
)

func TestCheckSigner(t *testing.T) {
	node := subject("system:node:n1", "system:nodes")
	for _, tc := range []struct {
		name    string
		signer  string
		req     x509.CertificateRequest
		usages  []certv1.KeyUsage
		wantErr string // "" when the request conforms
	}{
		{"apiserver client", certv1.KubeAPIServerClientSignerName, x509.CertificateRequest{Subject: subject("alice", "devs")}, clientUsages, ""},
		{"apiserver client with key encipherment", certv1.KubeAPIServerClientSignerName, x509.CertificateRequest{Subject: subject("alice")}, u(certv1.UsageKeyEncipherment, certv1.UsageDigitalSignature, certv1.UsageClientAuth), ""},
		{"apiserver client without client auth", certv1.KubeAPIServerClientSignerName, x509.CertificateRequest{Subject: subject("alice")}, u(certv1.UsageDigitalSignature), "missing required usage for client certificate: client auth"},
		{"apiserver client asking server auth", certv1.KubeAPIServerClientSignerName, x509.CertificateRequest{Subject: subject("alice")}, u(certv1.UsageClientAuth, certv1.UsageServerAuth), "invalid usage for client certificate: server auth"},

		{"kubelet client", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: node}, clientUsages, ""},
		{"kubelet client, RSA usages", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: node}, u(certv1.UsageKeyEncipherment, certv1.UsageDigitalSignature, certv1.UsageClientAuth), ""},
		{"kubelet client, other organization", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: subject("system:node:n1", "system:masters")}, clientUsages, "subject organization is not system:nodes"},
		{"kubelet client, extra organization", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: subject("system:node:n1", "system:nodes", "system:masters")}, clientUsages, "subject organization is not system:nodes"},
		{"kubelet client, not a node", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: subject("alice", "system:nodes")}, clientUsages, "subject common name does not begin with system:node:"},
		{"kubelet client, DNS name", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: node, DNSNames: []string{"n1"}}, clientUsages, "DNS subjectAltNames are not allowed"},
		{"kubelet client, IP", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: node, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, clientUsages, "IP subjectAltNames are not allowed"},
		{"kubelet client, email", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: node, EmailAddresses: []string{"a@b.c"}}, clientUsages, "Email subjectAltNames are not allowed"},
		{"kubelet client, missing digital signature", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: node}, u(certv1.UsageClientAuth), "usages did not match"},
		{"kubelet client, server auth too", certv1.KubeAPIServerClientKubeletSignerName, x509.CertificateRequest{Subject: node}, u(certv1.UsageDigitalSignature, certv1.UsageClientAuth, certv1.UsageServerAuth), "usages did not match"},

		{"kubelet serving", certv1.KubeletServingSignerName, x509.CertificateRequest{Subject: node, DNSNames: []string{"n1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, servingUsages, ""},
		{"kubelet serving, IP only", certv1.KubeletServingSignerName, x509.CertificateRequest{Subject: node, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, u(certv1.UsageKeyEncipherment, certv1.UsageDigitalSignature, certv1.UsageServerAuth), ""},
		{"kubelet serving, no names", certv1.KubeletServingSignerName, x509.CertificateRequest{Subject: node}, servingUsages, "DNS or IP subjectAltName is required"},
		{"kubelet serving, URI", certv1.KubeletServingSignerName, x509.CertificateRequest{Subject: node, DNSNames: []string{"n1"}, URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}}, servingUsages, "URI subjectAltNames are not allowed"},
		{"kubelet serving, client auth", certv1.KubeletServingSignerName, x509.CertificateRequest{Subject: node, DNSNames: []string{"n1"}}, clientUsages, "usages did not match"},
		{"kubelet serving, not a node", certv1.KubeletServingSignerName, x509.CertificateRequest{Subject: subject("web", "system:nodes"), DNSNames: []string{"n1"}}, servingUsages, "subject common name does not begin with system:node:"},
		{"kubelet serving, no organization", certv1.KubeletServingSignerName, x509.CertificateRequest{Subject: subject("system:node:n1"), DNSNames: []string{"n1"}}, servingUsages, "subject organization is not system:nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSigner(tc.signer, parsed(t, &tc.req), tc.usages)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func csrFor(signer, username string, groups []string, usages []certv1.KeyUsage) *certv1.CertificateSigningRequest {
	return &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{SignerName: signer, Username: username, Groups: groups, Usages: usages}}
}

func TestApprove(t *testing.T) {
	a := approvers{users: sets.New("system:join"), groups: sets.New("system:bootstrappers")}
	node := &x509.CertificateRequest{Subject: subject("system:node:n1", "system:nodes")}
	kc := certv1.KubeAPIServerClientKubeletSignerName
	for _, tc := range []struct {
		name string
		csr  *certv1.CertificateSigningRequest
		req  *x509.CertificateRequest
		want bool
	}{
		{"node renewing its own", csrFor(kc, "system:node:n1", nil, clientUsages), node, true},
		{"node asking for another node", csrFor(kc, "system:node:n2", nil, clientUsages), node, false},
		{"listed requester", csrFor(kc, "system:join", nil, clientUsages), node, true},
		{"requester in a listed group", csrFor(kc, "system:bootstrap:abcdef", []string{"system:bootstrappers", "system:authenticated"}, clientUsages), node, true},
		{"anyone else", csrFor(kc, "alice", []string{"system:authenticated"}, clientUsages), node, false},
		{"listed requester, not a kubelet client request", csrFor(kc, "system:join", nil, clientUsages), &x509.CertificateRequest{Subject: subject("system:node:n1", "system:masters")}, false},
		{"node, but serving certificate", csrFor(certv1.KubeletServingSignerName, "system:node:n1", nil, servingUsages), &x509.CertificateRequest{Subject: node.Subject, DNSNames: []string{"n1"}}, false},
		{"node, but apiserver client signer", csrFor(certv1.KubeAPIServerClientSignerName, "system:node:n1", nil, clientUsages), node, false},
		{"listed requester, wrong usages", csrFor(kc, "system:join", nil, u(certv1.UsageClientAuth, certv1.UsageServerAuth, certv1.UsageDigitalSignature)), node, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, msg := a.approve(tc.csr, parsed(t, tc.req))
			if ok != tc.want || (ok && msg == "") {
				t.Errorf("approve = %v %q, want %v", ok, msg, tc.want)
			}
		})
	}
}

func TestApprovalState(t *testing.T) {
	cond := func(ty certv1.RequestConditionType, s corev1.ConditionStatus) certv1.CertificateSigningRequestCondition {
		return certv1.CertificateSigningRequestCondition{Type: ty, Status: s}
	}
	for _, tc := range []struct {
		name             string
		conds            []certv1.CertificateSigningRequestCondition
		approved, denied bool
		failed           bool
	}{
		{"pending", nil, false, false, false},
		{"approved", []certv1.CertificateSigningRequestCondition{cond(certv1.CertificateApproved, corev1.ConditionTrue)}, true, false, false},
		{"denied", []certv1.CertificateSigningRequestCondition{cond(certv1.CertificateDenied, corev1.ConditionTrue)}, false, true, false},
		{"approved and denied", []certv1.CertificateSigningRequestCondition{cond(certv1.CertificateApproved, corev1.ConditionTrue), cond(certv1.CertificateDenied, corev1.ConditionTrue)}, false, true, false},
		{"approved then failed", []certv1.CertificateSigningRequestCondition{cond(certv1.CertificateApproved, corev1.ConditionTrue), cond(certv1.CertificateFailed, corev1.ConditionTrue)}, true, false, true},
		{"approval withdrawn", []certv1.CertificateSigningRequestCondition{cond(certv1.CertificateApproved, corev1.ConditionFalse)}, false, false, false},
	} {
		csr := &certv1.CertificateSigningRequest{Status: certv1.CertificateSigningRequestStatus{Conditions: tc.conds}}
		a, d := approvalState(csr)
		if a != tc.approved || d != tc.denied || hasFailed(csr) != tc.failed {
			t.Errorf("%s: approved=%v denied=%v failed=%v", tc.name, a, d, hasFailed(csr))
		}
	}
}

func TestDuration(t *testing.T) {
	secs := func(d time.Duration) *int32 { n := int32(d / time.Second); return &n }
	for _, tc := range []struct {
		asked *int32
		want  time.Duration
	}{
		{nil, DefaultDuration},
		{secs(time.Hour), time.Hour},
		{secs(2 * DefaultDuration), DefaultDuration},
		{secs(time.Minute), minDuration},
	} {
		if got := duration(DefaultDuration, tc.asked); got != tc.want {
			t.Errorf("duration(%v) = %v, want %v", tc.asked, got, tc.want)
		}
	}
}

func TestSign_ValidityUsagesAndNames(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	authority := testCA(t, now.Add(2*DefaultDuration))
	req := parsed(t, &x509.CertificateRequest{Subject: subject("system:node:n1", "system:nodes"), DNSNames: []string{"n1.example"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")},
		// A request asking to be a CA: the extension is dropped.
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: []byte{0x30, 0x03, 0x01, 0x01, 0xff}}}})
	for _, tc := range []struct {
		name                string
		ttl                 time.Duration
		notBefore, notAfter time.Time
		usages              []certv1.KeyUsage
		wantKeyUsage        x509.KeyUsage
		wantExt             []x509.ExtKeyUsage
	}{
		{name: "long-lived: backdated, lifetime from NotBefore", ttl: DefaultDuration, notBefore: now.Add(-backdate), notAfter: now.Add(-backdate).Add(DefaultDuration),
			usages: u(certv1.UsageKeyEncipherment, certv1.UsageDigitalSignature, certv1.UsageServerAuth), wantKeyUsage: x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature, wantExt: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{name: "short-lived: lifetime from now", ttl: time.Hour, notBefore: now.Add(-backdate), notAfter: now.Add(time.Hour),
			usages: u(certv1.UsageClientAuth, certv1.UsageServerAuth, certv1.UsageSigning), wantKeyUsage: x509.KeyUsageDigitalSignature, wantExt: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cert, err := authority.sign(req, tc.usages, tc.ttl, now)
			if err != nil {
				t.Fatal(err)
			}
			if !cert.NotBefore.Equal(tc.notBefore) || !cert.NotAfter.Equal(tc.notAfter) {
				t.Errorf("valid %v to %v, want %v to %v", cert.NotBefore, cert.NotAfter, tc.notBefore, tc.notAfter)
			}
			if cert.KeyUsage != tc.wantKeyUsage || !slices.Equal(cert.ExtKeyUsage, tc.wantExt) {
				t.Errorf("usages %v %v, want %v %v", cert.KeyUsage, cert.ExtKeyUsage, tc.wantKeyUsage, tc.wantExt)
			}
			if cert.IsCA || cert.Subject.CommonName != "system:node:n1" || !slices.Equal(cert.DNSNames, []string{"n1.example"}) || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("10.0.0.7")) {
				t.Errorf("cert IsCA=%v subject=%v DNS=%v IPs=%v", cert.IsCA, cert.Subject, cert.DNSNames, cert.IPAddresses)
			}
			if err := cert.CheckSignatureFrom(authority.cert); err != nil {
				t.Errorf("not signed by the CA: %v", err)
			}
		})
	}
}

func TestSign_CappedByCAExpiry(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	authority := testCA(t, now.Add(30*24*time.Hour))
	req := parsed(t, &x509.CertificateRequest{Subject: subject("alice")})
	_, cert, err := authority.sign(req, clientUsages, DefaultDuration, now)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.NotAfter.Equal(authority.cert.NotAfter) {
		t.Errorf("NotAfter %v, want the CA's %v", cert.NotAfter, authority.cert.NotAfter)
	}
	if _, _, err := authority.sign(req, clientUsages, DefaultDuration, authority.cert.NotAfter.Add(time.Second)); err == nil {
		t.Error("an expired CA signed")
	}
}

func TestKeyUsages_Unrecognized(t *testing.T) {
	if _, _, err := keyUsages(u(certv1.UsageClientAuth, "flying")); err == nil || !strings.Contains(err.Error(), "flying") {
		t.Errorf("err = %v", err)
	}
}
