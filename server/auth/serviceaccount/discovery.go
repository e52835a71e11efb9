package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"sort"
)

// The paths of the issuer's OpenID Connect discovery, as upstream serves
// them; RBAC's system:service-account-issuer-discovery role names them.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// discoveryMaxAge is how long relying parties may cache the documents
// (upstream's default for keys read from files).
const discoveryMaxAge = 3600

// Discovery serves the issuer's OpenID Connect discovery document and its
// JSON Web Key Set, so that relying parties outside the cluster can verify
// service-account tokens. The documents are built once: keys do not change
// while the server runs.
type Discovery struct {
	config, keys []byte
}

// NewDiscovery publishes keys for issuer (empty: DefaultIssuer), whose key
// set is at jwksURI (empty: the issuer's own JWKSPath). Issuer and jwksURI
// must be https URLs, as OIDC requires.
func NewDiscovery(issuer, jwksURI string, keys ...crypto.PublicKey) (*Discovery, error) {
	if issuer == "" {
		issuer = DefaultIssuer
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme != "https" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("service-account issuer %q: must be an https URL without query or fragment", issuer)
	}
	if jwksURI == "" {
		jwksURI = issuer + JWKSPath
	}
	if j, err := url.Parse(jwksURI); err != nil || j.Scheme != "https" {
		return nil, fmt.Errorf("jwks URI %q: must be an https URL", jwksURI)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys to publish", ErrUnsupportedKey)
	}
	set := jwkSet{Keys: []jwk{}}
	algs := map[string]bool{}
	for _, k := range keys {
		j, err := newJWK(k)
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, j)
		algs[j.Alg] = true
	}
	meta := openIDMetadata{
		Issuer:        issuer,
		JWKSURI:       jwksURI,
		ResponseTypes: []string{"id_token"}, // only ID tokens are issued
		SubjectTypes:  []string{"public"},
	}
	for a := range algs {
		meta.SigningAlgs = append(meta.SigningAlgs, a)
	}
	sort.Strings(meta.SigningAlgs)
	d := &Discovery{}
	if d.config, err = json.Marshal(meta); err != nil {
		return nil, fmt.Errorf("encode discovery document: %w", err)
	}
	if d.keys, err = json.Marshal(set); err != nil {
		return nil, fmt.Errorf("encode key set: %w", err)
	}
	return d, nil
}

// ConfigHandler serves OpenIDConfigPath.
func (d *Discovery) ConfigHandler() http.Handler { return serveDoc(d.config, "application/json") }

// KeysHandler serves JWKSPath.
func (d *Discovery) KeysHandler() http.Handler { return serveDoc(d.keys, "application/jwk-set+json") }

func serveDoc(body []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", discoveryMaxAge))
		w.Write(body)
	})
}

type openIDMetadata struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

type jwkSet struct {
	Keys []jwk `json:"keys"`
}

// jwk is a public key as RFC 7517 writes it, under the kid tokens carry.
type jwk struct {
	Use string `json:"use"`
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Crv string `json:"crv,omitempty"`
	Alg string `json:"alg"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
}

func newJWK(pub crypto.PublicKey) (jwk, error) {
	method, err := signingMethod(pub)
	if err != nil {
		return jwk{}, err
	}
	kid, err := keyID(pub)
	if err != nil {
		return jwk{}, err
	}
	j := jwk{Use: "sig", Kid: kid, Alg: method.Alg()}
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		j.Kty, j.N, j.E = "RSA", b64(k.N.Bytes()), b64(big.NewInt(int64(k.E)).Bytes())
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		j.Kty, j.Crv = "EC", k.Curve.Params().Name
		j.X, j.Y = b64(k.X.FillBytes(make([]byte, size))), b64(k.Y.FillBytes(make([]byte, size)))
	}
	return j, nil
}
