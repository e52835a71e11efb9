package serviceaccount

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tamper swaps the payload for one naming another service account while
// keeping the original signature.
func tamper(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.ReplaceAll(string(payload), "builder", "admin01")
	if forged == string(payload) {
		t.Fatal("tamper changed nothing")
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(forged))
	return strings.Join(parts, ".")
}

// validateCase is one token shown to the fixture's validator.
type validateCase struct {
	name string
	// token builds the token; setup (optional) changes the world after.
	token   func(t *testing.T, f *fixture) string
	setup   func(f *fixture)
	wantErr error // nil: must be accepted
	wantMsg string
}

func runValidateCases(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, newECKey(t))
			tok := tt.token(t, f)
			if tt.setup != nil {
				tt.setup(f)
			}
			u, err := f.validator.Validate(context.Background(), tok)
			wantErrIs(t, err, tt.wantErr)
			if tt.wantErr == nil && (u == nil || u.Name != "system:serviceaccount:default:builder") {
				t.Errorf("user = %+v", u)
			}
			if tt.wantErr != nil && u != nil {
				t.Errorf("user returned with error: %+v", u)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestValidateChecksTimesAudienceAndIssuer(t *testing.T) {
	runValidateCases(t, []validateCase{
		{name: "fresh token is accepted", token: plain},
		{name: "expired", token: plain, setup: at(61*time.Minute + Leeway), wantErr: ErrExpired, wantMsg: "expired"},
		{name: "expired but within leeway is accepted", token: plain, setup: at(time.Hour + 30*time.Second)},
		{name: "not yet valid", token: plain, setup: at(-2 * Leeway), wantErr: ErrNotYetValid},
		{name: "wrong audience", token: func(t *testing.T, f *fixture) string {
			r := request(false, false)
			r.Audiences = []string{"vault"}
			return f.issue(t, r)
		}, wantErr: ErrWrongAudience, wantMsg: "vault"},
		{name: "another issuer", token: func(t *testing.T, f *fixture) string {
			other := NewIssuer(f.key, "https://other.example.com")
			other.now = f.issuer.now
			tok, _, err := other.Issue(request(false, false))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, wantErr: ErrWrongIssuer, wantMsg: "other.example.com"},
	})
}

func TestValidateRefusesForgedAndMalformedTokens(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	runValidateCases(t, []validateCase{
		{name: "signed by another key", token: func(t *testing.T, f *fixture) string {
			other := NewIssuer(newECKey(t), "")
			other.now = f.issuer.now
			tok, _, err := other.Issue(request(false, false))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, wantErr: ErrInvalidSignature, wantMsg: "signature"},
		{name: "tampered payload", token: func(t *testing.T, f *fixture) string { return tamper(t, plain(t, f)) }, wantErr: ErrInvalidSignature},
		{name: "truncated signature", token: func(t *testing.T, f *fixture) string {
			tok := plain(t, f)
			return tok[:len(tok)-4]
		}, wantErr: ErrInvalidSignature},
		{name: "alg none", token: func(t *testing.T, f *fixture) string {
			return sign(t, jwt.SigningMethodNone, f.validClaims(), jwt.UnsafeAllowNoneSignatureType)
		}, wantErr: ErrInvalidSignature},
		{name: "HS256 keyed with the public key (alg confusion)", token: func(t *testing.T, f *fixture) string {
			der, err := x509.MarshalPKIXPublicKey(f.key.Public())
			if err != nil {
				t.Fatal(err)
			}
			return sign(t, jwt.SigningMethodHS256, f.validClaims(), der)
		}, wantErr: ErrInvalidSignature},
		{name: "RS256 token for an ECDSA key", token: func(t *testing.T, f *fixture) string {
			return sign(t, jwt.SigningMethodRS256, f.validClaims(), rsaKey)
		}, wantErr: ErrInvalidSignature},
		{name: "empty string", token: literal(""), wantErr: ErrMalformed},
		{name: "one segment", token: literal("abc"), wantErr: ErrMalformed},
		{name: "three garbage segments", token: literal("a.b.c"), wantErr: ErrMalformed},
		{name: "bearer prefix left on", token: func(t *testing.T, f *fixture) string { return "Bearer " + plain(t, f) }, wantErr: ErrMalformed},
		{name: "JSON header that is not an object", token: literal("WzFd.e30.c2ln"), wantErr: ErrMalformed},
	})
}

func TestValidateRefusesTokensWhoseBindingsAreGoneOrInconsistent(t *testing.T) {
	runValidateCases(t, []validateCase{
		{name: "service account deleted", token: plain, setup: func(f *fixture) { delete(f.lookup.sas, "default/builder") }, wantErr: ErrServiceAccountNotFound},
		{name: "service account recreated with a new UID", token: plain, setup: func(f *fixture) { f.lookup.sas["default/builder"] = "sa-uid-2" }, wantErr: ErrServiceAccountUIDMismatch},
		{name: "bound pod deleted", token: podBound, setup: func(f *fixture) { delete(f.lookup.pods, "default/web-0") }, wantErr: ErrPodNotFound},
		{name: "bound pod recreated with a new UID", token: podBound, setup: func(f *fixture) { f.lookup.pods["default/web-0"] = "pod-uid-2" }, wantErr: ErrPodUIDMismatch},
		{name: "pod deletion does not affect unbound tokens", token: plain, setup: func(f *fixture) { delete(f.lookup.pods, "default/web-0") }},
		{name: "bound node deleted", token: func(t *testing.T, f *fixture) string { return f.issue(t, request(false, true)) }, setup: func(f *fixture) {
			f.validator.lookup = nodeAwareLookup{f.lookup, map[string]string{}}
		}, wantErr: ErrNodeNotFound},
		{name: "lookup failure", token: plain, setup: func(f *fixture) { f.lookup.err = errors.New("store down") }, wantErr: ErrLookup, wantMsg: "store down"},
		{name: "no kubernetes.io claim", token: func(t *testing.T, f *fixture) string {
			c := f.validClaims()
			c.Kubernetes = nil
			return sign(t, jwt.SigningMethodES256, c, f.key)
		}, wantErr: ErrInvalidClaims},
		{name: "sub disagrees with kubernetes.io", token: func(t *testing.T, f *fixture) string {
			c := f.validClaims()
			c.Subject = "system:serviceaccount:kube-system:admin"
			return sign(t, jwt.SigningMethodES256, c, f.key)
		}, wantErr: ErrInvalidClaims},
		{name: "no exp", token: func(t *testing.T, f *fixture) string {
			c := f.validClaims()
			c.ExpiresAt = nil
			return sign(t, jwt.SigningMethodES256, c, f.key)
		}, wantErr: ErrInvalidClaims},
	})
}

func plain(t *testing.T, f *fixture) string    { return f.issue(t, request(false, false)) }
func podBound(t *testing.T, f *fixture) string { return f.issue(t, request(true, true)) }

func literal(s string) func(*testing.T, *fixture) string {
	return func(*testing.T, *fixture) string { return s }
}

// at moves the validator's clock to t0+d.
func at(d time.Duration) func(*fixture) {
	return func(f *fixture) {
		when := f.t0.Add(d)
		f.validator.now = func() time.Time { return when }
	}
}

func TestRSAValidatorRefusesES256Tokens(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, rsaKey)
	ecTok := sign(t, jwt.SigningMethodES256, f.validClaims(), newECKey(t))
	_, err = f.validator.Validate(context.Background(), ecTok)
	wantErrIs(t, err, ErrInvalidSignature)
	if !strings.Contains(err.Error(), "ES256") {
		t.Errorf("error %q does not name the refused alg", err)
	}
}
