// Package jointoken is the join token both sides of a join agree on, in
// the k3s format: K10<sha256 of the CA bundle>::server:<secret> for the
// server token, K10<hash>::<id>.<secret> for extra (bootstrap) tokens. It
// also computes the CA hash and holds the wire types of the join protocol.
// It is a leaf package: the server and the agent both import it.
package jointoken

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

const (
	// Prefix starts every full token.
	Prefix = "K10"
	// ServerID is the ID of the server token.
	ServerID = "server"
	// serverSecretBytes is the entropy of a generated server secret.
	serverSecretBytes = 16
)

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid join token")

var (
	hashRe     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	idRe       = regexp.MustCompile(`^[a-z0-9]{6}$`)
	bootFullRe = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
)

// Token is a parsed join token.
type Token struct {
	// CAHash is the hex SHA-256 the server's CA must have ("" when the
	// token was a bare secret).
	CAHash string
	// ID is ServerID or a bootstrap token's 6-character id.
	ID string
	// Secret proves the holder may join.
	Secret string
}

// Parse reads "K10<hash>::server:<secret>", "K10<hash>::<id>.<secret>", a
// bare "<id>.<secret>" or a bare server secret.
func Parse(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Token{}, fmt.Errorf("%w: empty", ErrInvalid)
	}
	if !strings.HasPrefix(s, Prefix) || !strings.Contains(s, "::") {
		return parseCredential("", s)
	}
	hash, cred, _ := strings.Cut(strings.TrimPrefix(s, Prefix), "::")
	if !hashRe.MatchString(hash) {
		return Token{}, fmt.Errorf("%w: the CA hash after %s must be 64 lower-case hex digits", ErrInvalid, Prefix)
	}
	if cred == "" {
		return Token{}, fmt.Errorf("%w: nothing after %s<hash>::", ErrInvalid, Prefix)
	}
	return parseCredential(hash, cred)
}

func parseCredential(hash, cred string) (Token, error) {
	if strings.ContainsAny(cred, " \t\r\n") {
		return Token{}, fmt.Errorf("%w: it contains white space", ErrInvalid)
	}
	if user, secret, ok := strings.Cut(cred, ":"); ok {
		if user != ServerID {
			return Token{}, fmt.Errorf("%w: unknown user %q before the secret (want %q)", ErrInvalid, user, ServerID)
		}
		if secret == "" {
			return Token{}, fmt.Errorf("%w: empty secret", ErrInvalid)
		}
		return Token{CAHash: hash, ID: ServerID, Secret: secret}, nil
	}
	if bootFullRe.MatchString(cred) {
		id, secret, _ := strings.Cut(cred, ".")
		return Token{CAHash: hash, ID: id, Secret: secret}, nil
	}
	if hash != "" {
		return Token{}, fmt.Errorf("%w: want %s<hash>::server:<secret> or %s<hash>::<id>.<secret>", ErrInvalid, Prefix, Prefix)
	}
	return Token{ID: ServerID, Secret: cred}, nil
}

// String is the full token, or the bare credential when CAHash is empty.
func (t Token) String() string {
	if t.CAHash == "" {
		return t.Credential()
	}
	return Prefix + t.CAHash + "::" + t.Credential()
}

// Credential is the part after "::": server:<secret> or <id>.<secret>.
func (t Token) Credential() string {
	if t.IsServer() {
		return ServerID + ":" + t.Secret
	}
	return t.ID + "." + t.Secret
}

// IsServer reports whether this is the server token.
func (t Token) IsServer() bool { return t.ID == ServerID || t.ID == "" }

// SetAuth puts the token's secret on a join request: basic auth
// node:<secret> for the server token (as k3s agents send it), a bearer
// <id>.<secret> for bootstrap tokens.
func (t Token) SetAuth(r *http.Request) {
	if t.IsServer() {
		r.SetBasicAuth("node", t.Secret)
		return
	}
	r.Header.Set("Authorization", "Bearer "+t.ID+"."+t.Secret)
}

// FromRequest reads the credential SetAuth put on r: ok is false when the
// request carries none.
func FromRequest(r *http.Request) (Token, bool) {
	if user, pass, ok := r.BasicAuth(); ok && (user == "node" || user == ServerID) && pass != "" {
		return Token{ID: ServerID, Secret: pass}, true
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return Token{}, false
	}
	bearer = strings.TrimSpace(bearer)
	if !bootFullRe.MatchString(bearer) {
		return Token{}, false
	}
	id, secret, _ := strings.Cut(bearer, ".")
	return Token{ID: id, Secret: secret}, true
}

// NewSecret returns a random server secret (32 hex characters).
func NewSecret() (string, error) {
	b := make([]byte, serverSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("jointoken: random secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

const bootstrapAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewBootstrap returns a random bootstrap token id (6 characters) and
// secret (16 characters), both of [a-z0-9].
func NewBootstrap() (id, secret string, err error) {
	s, err := randomString(22)
	if err != nil {
		return "", "", err
	}
	return s[:6], s[6:], nil
}

func randomString(n int) (string, error) {
	out := make([]byte, n)
	buf := make([]byte, 1)
	for i := 0; i < n; {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("jointoken: random token: %w", err)
		}
		// Reject the top of the byte range so every character is equally
		// likely.
		if int(buf[0]) >= 256-256%len(bootstrapAlphabet) {
			continue
		}
		out[i] = bootstrapAlphabet[int(buf[0])%len(bootstrapAlphabet)]
		i++
	}
	return string(out), nil
}

// ValidID reports whether id is a bootstrap token id ([a-z0-9]{6}).
func ValidID(id string) bool { return idRe.MatchString(id) }
