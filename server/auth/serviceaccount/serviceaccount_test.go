package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"skiff/server/auth"
)

func TestIssuedTokenValidatesAsTheServiceAccountUser(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}
	tests := []struct {
		name      string
		key       crypto.Signer
		req       Request
		wantExtra map[string][]string
	}{
		{"unbound token (ES256)", newECKey(t), request(false, false), map[string][]string{}},
		{"unbound token (RS256)", rsaKey, request(false, false), map[string][]string{}},
		{"pod-bound token carries pod and node", newECKey(t), request(true, true), map[string][]string{
			ExtraPodName: {"web-0"}, ExtraPodUID: {podUID}, ExtraNodeName: {"node1"}, ExtraNodeUID: {nodeUID},
		}},
		{"node-bound token carries the node", newECKey(t), request(false, true), map[string][]string{
			ExtraNodeName: {"node1"}, ExtraNodeUID: {nodeUID},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.key)
			tok, expires, err := f.issuer.Issue(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !expires.Equal(f.t0.Add(time.Hour)) {
				t.Errorf("expires = %s, want t0+1h", expires)
			}
			u, err := f.validator.Validate(context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			if u.Name != "system:serviceaccount:default:builder" || u.UID != saUID || !reflect.DeepEqual(u.Groups, groups) {
				t.Errorf("user = %+v", u)
			}
			jti := u.Extra[ExtraCredentialID]
			if len(jti) != 1 || !strings.HasPrefix(jti[0], "JTI=") {
				t.Fatalf("credential-id = %q", jti)
			}
			delete(u.Extra, ExtraCredentialID)
			if !reflect.DeepEqual(u.Extra, tt.wantExtra) {
				t.Errorf("extra = %v, want %v", u.Extra, tt.wantExtra)
			}
		})
	}
}

func TestTokenHasKubernetesBoundTokenShape(t *testing.T) {
	f := newFixture(t, newECKey(t))
	r := request(true, true)
	r.Audiences = []string{"vault", "api"}
	r.Expiration = 2 * time.Hour
	r.WarnAfter = time.Hour
	parts := strings.Split(f.issue(t, r), ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	var header map[string]any
	var payload struct {
		Iss, Sub, Jti string
		Aud           []string
		Exp, Iat, Nbf int64
		K8s           struct {
			Namespace      string
			ServiceAccount struct{ Name, UID string }
			Pod, Node      struct{ Name, UID string }
			WarnAfter      int64
		} `json:"kubernetes.io"`
	}
	decode(t, parts[0], &header)
	decode(t, parts[1], &payload)
	if header["alg"] != "ES256" || header["kid"] == "" || header["kid"] == nil {
		t.Errorf("header = %v", header)
	}
	k := payload.K8s
	unix := f.t0.Unix()
	checks := []struct {
		name      string
		got, want any
	}{
		{"iss", payload.Iss, "https://kubernetes.default.svc.cluster.local"},
		{"sub", payload.Sub, "system:serviceaccount:default:builder"},
		{"aud", strings.Join(payload.Aud, ","), "vault,api"},
		{"iat", payload.Iat, unix}, {"nbf", payload.Nbf, unix}, {"exp", payload.Exp, unix + 7200},
		{"jti is a v4 UUID", regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(payload.Jti), true},
		{"namespace", k.Namespace, "default"},
		{"serviceaccount", k.ServiceAccount, struct{ Name, UID string }{"builder", saUID}},
		{"pod", k.Pod, struct{ Name, UID string }{"web-0", podUID}},
		{"node", k.Node, struct{ Name, UID string }{"node1", nodeUID}},
		{"warnafter", k.WarnAfter, unix + 3600},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func decode(t *testing.T, seg string, into any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func TestIssueRejectsIncompleteRequests(t *testing.T) {
	edKey := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	tests := []struct {
		name    string
		key     crypto.Signer
		mutate  func(*Request)
		wantErr error
	}{
		{"no namespace", nil, func(r *Request) { r.Namespace = "" }, ErrInvalidRequest},
		{"no service account UID", nil, func(r *Request) { r.ServiceAccountUID = "" }, ErrInvalidRequest},
		{"pod name without UID", nil, func(r *Request) { r.PodName = "web-0" }, ErrInvalidRequest},
		{"node UID without name", nil, func(r *Request) { r.NodeUID = "x" }, ErrInvalidRequest},
		{"negative expiration", nil, func(r *Request) { r.Expiration = -time.Second }, ErrInvalidRequest},
		{"Ed25519 key", edKey, func(*Request) {}, ErrUnsupportedKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if key == nil {
				key = newECKey(t)
			}
			r := request(false, false)
			tt.mutate(&r)
			tok, _, err := NewIssuer(key, "").Issue(r)
			wantErrIs(t, err, tt.wantErr)
			if tok != "" {
				t.Errorf("token returned with error: %q", tok)
			}
		})
	}
}

func TestValidatorWithoutLookupSkipsLivenessChecks(t *testing.T) {
	f := newFixture(t, newECKey(t))
	tok := f.issue(t, request(true, false))
	v := NewValidator(f.key.Public(), "", nil, nil)
	v.now = f.validator.now
	u, err := v.Validate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !u.InGroup(auth.GroupAuthenticated) {
		t.Errorf("groups = %v", u.Groups)
	}
}
