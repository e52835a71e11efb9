// Package serviceaccount issues and validates service-account tokens in the
// shape Kubernetes' TokenRequest API produces (bound service-account
// tokens): JWTs whose kubernetes.io private claim names the namespace,
// service account and, optionally, the pod and node the token is bound to.
package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	// DefaultIssuer is kube-apiserver's conventional --service-account-issuer.
	DefaultIssuer = "https://kubernetes.default.svc.cluster.local"
	// DefaultExpiration is what TokenRequest grants when none is asked for.
	DefaultExpiration = time.Hour
	// Leeway tolerates clock skew on exp/nbf/iat, as Kubernetes does.
	Leeway = time.Minute

	// UserPrefix starts every service-account user name.
	UserPrefix = "system:serviceaccount:"
)

// Keys of auth.User.Extra set for bound tokens, as Kubernetes names them.
const (
	ExtraPodName      = "authentication.kubernetes.io/pod-name"
	ExtraPodUID       = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName     = "authentication.kubernetes.io/node-name"
	ExtraNodeUID      = "authentication.kubernetes.io/node-uid"
	ExtraCredentialID = "authentication.kubernetes.io/credential-id"
)

// Errors Validate and Issue wrap, so callers can tell the cases apart.
// ErrMalformed and ErrWrongIssuer mean "not a token of this issuer": a
// chain of token authenticators should try the next one on those.
var (
	ErrMalformed                 = errors.New("malformed token")
	ErrWrongIssuer               = errors.New("token is from another issuer")
	ErrInvalidSignature          = errors.New("invalid token signature")
	ErrExpired                   = errors.New("token has expired")
	ErrNotYetValid               = errors.New("token is not valid yet")
	ErrWrongAudience             = errors.New("token audience not accepted")
	ErrInvalidClaims             = errors.New("invalid service-account claims")
	ErrServiceAccountNotFound    = errors.New("service account no longer exists")
	ErrServiceAccountUIDMismatch = errors.New("service account was recreated")
	ErrPodNotFound               = errors.New("bound pod no longer exists")
	ErrPodUIDMismatch            = errors.New("bound pod was recreated")
	ErrNodeNotFound              = errors.New("bound node no longer exists")
	ErrNodeUIDMismatch           = errors.New("bound node was recreated")
	ErrLookup                    = errors.New("cannot check token bindings")
	ErrUnsupportedKey            = errors.New("unsupported signing key: want RSA or ECDSA P-256/384/521")
	ErrInvalidRequest            = errors.New("invalid token request")
)

// claims is the token payload: the registered claims plus kubernetes.io.
type claims struct {
	jwt.RegisteredClaims
	Kubernetes *kubernetesClaims `json:"kubernetes.io,omitempty"`
}

type kubernetesClaims struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount ref              `json:"serviceaccount"`
	Pod            *ref             `json:"pod,omitempty"`
	Node           *ref             `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

type ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// UserName is the user a service account authenticates as.
func UserName(namespace, name string) string {
	return UserPrefix + namespace + ":" + name
}

// signingMethod picks the one JWT algorithm a key may be used with. The
// validator accepts only this algorithm, which is what defeats alg
// confusion (an HS256 token "signed" with the public key) and "none".
func signingMethod(pub crypto.PublicKey) (jwt.SigningMethod, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jwt.SigningMethodRS256, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return jwt.SigningMethodES256, nil
		case elliptic.P384():
			return jwt.SigningMethodES384, nil
		case elliptic.P521():
			return jwt.SigningMethodES512, nil
		}
	}
	return nil, fmt.Errorf("%w: %T", ErrUnsupportedKey, pub)
}

// keyID derives the JWT kid from the public key as Kubernetes does
// (unpadded base64url of the SHA-256 of its PKIX DER), so a future JWKS
// endpoint can publish keys under ids verifiers already see in tokens.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsupportedKey, err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
