package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// keyFromJWK rebuilds the public key a relying party would.
func keyFromJWK(t *testing.T, j jwk) crypto.PublicKey {
	t.Helper()
	num := func(s string) *big.Int {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("jwk field %q: %v", s, err)
		}
		return new(big.Int).SetBytes(b)
	}
	switch j.Kty {
	case "RSA":
		return &rsa.PublicKey{N: num(j.N), E: int(num(j.E).Int64())}
	case "EC":
		curves := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}
		return &ecdsa.PublicKey{Curve: curves[j.Crv], X: num(j.X), Y: num(j.Y)}
	}
	t.Fatalf("unexpected kty %q", j.Kty)
	return nil
}

// TestDiscovery_PublishedKeysVerifyIssuedTokens: the discovery document
// names the issuer and the key set, and the key set verifies the issuer's
// tokens under the kid they carry: what an OIDC relying party checks.
func TestDiscovery_PublishedKeysVerifyIssuedTokens(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		alg  string
	}{{"rsa", rsaKey, "RS256"}, {"ecdsa", ecKey, "ES384"}} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDiscovery("", "", tc.key.Public())
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle(OpenIDConfigPath, d.ConfigHandler())
			mux.Handle(JWKSPath, d.KeysHandler())
			srv := httptest.NewServer(mux)
			defer srv.Close()

			var meta openIDMetadata
			getJSON(t, srv.URL+OpenIDConfigPath, "application/json", &meta)
			if meta.Issuer != DefaultIssuer || meta.JWKSURI != DefaultIssuer+JWKSPath || len(meta.SigningAlgs) != 1 || meta.SigningAlgs[0] != tc.alg {
				t.Errorf("discovery document = %+v", meta)
			}
			var set jwkSet
			getJSON(t, srv.URL+JWKSPath, "application/jwk-set+json", &set)
			if len(set.Keys) != 1 {
				t.Fatalf("key set = %+v, want one key", set)
			}

			token, _, err := NewIssuer(tc.key, "").Issue(Request{Namespace: "ns", ServiceAccount: "default", ServiceAccountUID: "u1", Audiences: []string{"oidc-discovery-test"}})
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := jwt.Parse(token, func(tok *jwt.Token) (any, error) {
				for _, k := range set.Keys {
					if k.Kid == tok.Header["kid"] && k.Alg == tok.Method.Alg() {
						return keyFromJWK(t, k), nil
					}
				}
				t.Fatalf("no published key for kid %v", tok.Header["kid"])
				return nil, nil
			}, jwt.WithIssuer(meta.Issuer), jwt.WithAudience("oidc-discovery-test"))
			if err != nil || !parsed.Valid {
				t.Errorf("token does not verify with the published key: %v", err)
			}
		})
	}
}

func getJSON(t *testing.T, url, contentType string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentType {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

func TestNewDiscovery_InvalidURLs_AreRefused(t *testing.T) {
	key := newECKey(t).Public()
	for _, tc := range []struct{ issuer, jwks string }{
		{"http://kubernetes.default.svc", ""},
		{"https://issuer.example?x=1", ""},
		{"", "http://insecure.example/jwks"},
	} {
		if _, err := NewDiscovery(tc.issuer, tc.jwks, key); err == nil {
			t.Errorf("NewDiscovery(%q, %q) accepted", tc.issuer, tc.jwks)
		}
	}
}
