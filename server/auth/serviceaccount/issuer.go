package serviceaccount

import (
	"crypto"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer mints service-account tokens. It is safe for concurrent use.
type Issuer struct {
	key    crypto.Signer
	issuer string
	now    func() time.Time
}

// NewIssuer signs with key, which must be an *rsa.PrivateKey (RS256) or an
// *ecdsa.PrivateKey (ES256/384/512); certs.Bundle.ServiceAccountKey() is
// one. An empty issuer means DefaultIssuer.
func NewIssuer(key crypto.Signer, issuer string) *Issuer {
	if issuer == "" {
		issuer = DefaultIssuer
	}
	return &Issuer{key: key, issuer: issuer, now: time.Now}
}

// Request describes the token to issue, as a TokenRequest does.
type Request struct {
	Namespace         string
	ServiceAccount    string
	ServiceAccountUID string
	// Audiences default to the issuer, as kube-apiserver's --api-audiences
	// default to --service-account-issuer.
	Audiences []string
	// Expiration defaults to DefaultExpiration.
	Expiration time.Duration
	// PodName and PodUID bind the token to a pod: it dies with the pod.
	PodName, PodUID string
	// NodeName and NodeUID record the node (the pod's node for pod-bound
	// tokens) and bind the token to it when no pod is given.
	NodeName, NodeUID string
	// WarnAfter, if set, is written as the warnafter claim: kube-apiserver
	// extends some projected tokens' expiry and marks when they should have
	// been refreshed.
	WarnAfter time.Duration
}

func (r Request) validate() error {
	switch {
	case r.Namespace == "" || r.ServiceAccount == "" || r.ServiceAccountUID == "":
		return fmt.Errorf("%w: namespace, service account name and UID are required", ErrInvalidRequest)
	case (r.PodName == "") != (r.PodUID == ""):
		return fmt.Errorf("%w: pod binding needs both name and UID", ErrInvalidRequest)
	case (r.NodeName == "") != (r.NodeUID == ""):
		return fmt.Errorf("%w: node binding needs both name and UID", ErrInvalidRequest)
	case r.Expiration < 0 || r.WarnAfter < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidRequest)
	}
	return nil
}

// Issue signs a token for r and returns it with its expiry (whole seconds,
// as in the token).
func (i *Issuer) Issue(r Request) (token string, expires time.Time, err error) {
	if err := r.validate(); err != nil {
		return "", time.Time{}, err
	}
	method, err := signingMethod(i.key.Public())
	if err != nil {
		return "", time.Time{}, err
	}
	kid, err := keyID(i.key.Public())
	if err != nil {
		return "", time.Time{}, err
	}
	c := i.claims(r)
	t := jwt.NewWithClaims(method, c)
	t.Header["kid"] = kid
	token, err = t.SignedString(i.key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign service-account token: %w", err)
	}
	return token, c.ExpiresAt.Time, nil
}

func (i *Issuer) claims(r Request) *claims {
	now := i.now()
	exp := r.Expiration
	if exp == 0 {
		exp = DefaultExpiration
	}
	aud := r.Audiences
	if len(aud) == 0 {
		aud = []string{i.issuer}
	}
	k := &kubernetesClaims{
		Namespace:      r.Namespace,
		ServiceAccount: ref{Name: r.ServiceAccount, UID: r.ServiceAccountUID},
	}
	if r.PodName != "" {
		k.Pod = &ref{Name: r.PodName, UID: r.PodUID}
	}
	if r.NodeName != "" {
		k.Node = &ref{Name: r.NodeName, UID: r.NodeUID}
	}
	if r.WarnAfter > 0 {
		k.WarnAfter = jwt.NewNumericDate(now.Add(r.WarnAfter))
	}
	return &claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.issuer,
			Subject:   UserName(r.Namespace, r.ServiceAccount),
			Audience:  jwt.ClaimStrings(append([]string(nil), aud...)),
			ExpiresAt: jwt.NewNumericDate(now.Add(exp)),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ID:        newUUID(),
		},
		Kubernetes: k,
	}
}

// newUUID returns a random (version 4) UUID for the jti claim, the form
// Kubernetes uses, so credential-id values look the same in audit logs.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: crypto/rand panics rather than return an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
