package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	testAudience = "https://kubernetes.default.svc.cluster.local"
	saUID        = "sa-uid-1"
	podUID       = "pod-uid-1"
	nodeUID      = "node-uid-1"
)

// fakeLookup serves UIDs from maps keyed "ns/name" (nodes by name).
type fakeLookup struct {
	sas, pods map[string]string
	err       error
}

func (l *fakeLookup) ServiceAccountUID(_ context.Context, ns, name string) (string, bool, error) {
	uid, ok := l.sas[ns+"/"+name]
	return uid, ok, l.err
}

func (l *fakeLookup) PodUID(_ context.Context, ns, name string) (string, bool, error) {
	uid, ok := l.pods[ns+"/"+name]
	return uid, ok, l.err
}

// nodeAwareLookup also implements NodeLookup.
type nodeAwareLookup struct {
	*fakeLookup
	nodes map[string]string
}

func (l nodeAwareLookup) NodeUID(_ context.Context, name string) (string, bool, error) {
	uid, ok := l.nodes[name]
	return uid, ok, nil
}

// fixture is an issuer and validator sharing one key and a fixed clock, and
// a cluster holding SA default/builder, pod default/web-0 and node node1.
type fixture struct {
	key       crypto.Signer
	t0        time.Time
	issuer    *Issuer
	validator *Validator
	lookup    *fakeLookup
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newFixture(t *testing.T, key crypto.Signer) *fixture {
	t.Helper()
	t0 := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	lookup := &fakeLookup{
		sas:  map[string]string{"default/builder": saUID},
		pods: map[string]string{"default/web-0": podUID},
	}
	iss := NewIssuer(key, "")
	iss.now = func() time.Time { return t0 }
	v := NewValidator(key.Public(), "", []string{"other-audience", testAudience}, nodeAwareLookup{lookup, map[string]string{"node1": nodeUID}})
	v.now = func() time.Time { return t0 }
	return &fixture{key: key, t0: t0, issuer: iss, validator: v, lookup: lookup}
}

// request is a token for default/builder with the given bindings.
func request(podBound, nodeBound bool) Request {
	r := Request{Namespace: "default", ServiceAccount: "builder", ServiceAccountUID: saUID}
	if podBound {
		r.PodName, r.PodUID = "web-0", podUID
	}
	if nodeBound {
		r.NodeName, r.NodeUID = "node1", nodeUID
	}
	return r
}

func (f *fixture) issue(t *testing.T, r Request) string {
	t.Helper()
	tok, _, err := f.issuer.Issue(r)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	return tok
}

// validClaims is what Issue would put in a token for default/builder at t0,
// for tests that sign hand-made tokens.
func (f *fixture) validClaims() *claims {
	return f.issuer.claims(request(false, false))
}

func sign(t *testing.T, method jwt.SigningMethod, c jwt.Claims, key any) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", method.Alg(), err)
	}
	return tok
}

func wantErrIs(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("error = %v, want one wrapping %q", err, want)
	}
}
