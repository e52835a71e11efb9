// Package bootstrapdata shares a cluster's secrets — its CAs and the
// service-account key — between servers whose only common ground is an
// external datastore (--datastore-endpoint), as k3s does: the first server
// seals its files with a key derived from the server token and stores them
// under a key named by the token's hash; a server started later with the
// same token finds them there and makes its own certificates from them, so
// every server of the cluster has one CA and signs tokens any other
// accepts. Without the token the data is unreadable; a wrong token finds
// nothing under its own key and is refused because another cluster's data
// is present.
//
// The keys live under Prefix, outside /registry/: the API server's cache
// sees them only as revisions that move.
package bootstrapdata

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"skiff/store"
)

// Prefix holds one key per cluster token.
const Prefix = "/skiff/bootstrap/"

// iterations of PBKDF2: enough to make guessing a token from a stolen
// datastore slow, few enough to add nothing noticeable to a start.
const iterations = 100_000

var (
	// ErrWrongToken: the data under this token's key does not open with it.
	ErrWrongToken = errors.New("bootstrap data: cannot be decrypted with this token")
	// ErrOtherCluster: the datastore holds bootstrap data of another token.
	ErrOtherCluster = errors.New("bootstrap data: the datastore already holds a cluster started with another token")
)

// KV is what this package needs of the store.
type KV interface {
	Get(ctx context.Context, key string) (store.KeyValue, error)
	Create(ctx context.Context, key string, value []byte) (store.KeyValue, error)
	List(ctx context.Context, opts store.ListOptions) (store.ListResult, error)
}

// Key is where the data sealed with secret is kept: the hash names the
// token without revealing it.
func Key(secret string) string {
	sum := sha256.Sum256([]byte("skiff-bootstrap\x00" + secret))
	return Prefix + hex.EncodeToString(sum[:16])
}

// sealed is the stored form.
type sealed struct {
	Version int    `json:"version"`
	Salt    []byte `json:"salt"`
	Nonce   []byte `json:"nonce"`
	Data    []byte `json:"data"` // AES-256-GCM of the JSON of the files
}

func aead(secret string, salt []byte) (cipher.AEAD, error) {
	key, err := pbkdf2.Key(sha256.New, secret, salt, iterations, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts files (name → content) with a key derived from secret.
func Seal(secret string, files map[string][]byte) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("bootstrap data: empty token secret")
	}
	plain, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	s := sealed{Version: 1, Salt: make([]byte, 16)}
	if _, err := rand.Read(s.Salt); err != nil {
		return nil, err
	}
	g, err := aead(secret, s.Salt)
	if err != nil {
		return nil, err
	}
	s.Nonce = make([]byte, g.NonceSize())
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, err
	}
	s.Data = g.Seal(nil, s.Nonce, plain, []byte(Key(secret)))
	return json.Marshal(s)
}

// Unseal is Seal's inverse; ErrWrongToken when secret does not open it.
func Unseal(secret string, blob []byte) (map[string][]byte, error) {
	var s sealed
	if err := json.Unmarshal(blob, &s); err != nil {
		return nil, fmt.Errorf("bootstrap data: malformed: %w", err)
	}
	if s.Version != 1 {
		return nil, fmt.Errorf("bootstrap data: version %d is not known to this skiff", s.Version)
	}
	g, err := aead(secret, s.Salt)
	if err != nil {
		return nil, err
	}
	if len(s.Nonce) != g.NonceSize() {
		return nil, fmt.Errorf("bootstrap data: malformed nonce")
	}
	plain, err := g.Open(nil, s.Nonce, s.Data, []byte(Key(secret)))
	if err != nil {
		return nil, ErrWrongToken
	}
	var files map[string][]byte
	if err := json.Unmarshal(plain, &files); err != nil {
		return nil, fmt.Errorf("bootstrap data: malformed content: %w", err)
	}
	return files, nil
}

// Fetch returns the files stored for secret; found is false when there are
// none and no other token's either (the first server of a cluster).
func Fetch(ctx context.Context, kv KV, secret string) (files map[string][]byte, found bool, err error) {
	kvv, err := kv.Get(ctx, Key(secret))
	switch {
	case err == nil:
		files, err := Unseal(secret, kvv.Value)
		return files, err == nil, err
	case !errors.Is(err, store.ErrNotFound):
		return nil, false, fmt.Errorf("bootstrap data: read: %w", err)
	}
	res, err := kv.List(ctx, store.ListOptions{Prefix: Prefix, Limit: 1})
	if err != nil {
		return nil, false, fmt.Errorf("bootstrap data: list: %w", err)
	}
	if len(res.Items) > 0 {
		return nil, false, fmt.Errorf("%w (%s): give every server the first server's token (its <data-dir>/server/token)", ErrOtherCluster, strings.TrimPrefix(res.Items[0].Key, Prefix))
	}
	return nil, false, nil
}

// Publish stores files for secret unless a server did first; it returns
// what is stored afterwards and whether it was this call's files.
func Publish(ctx context.Context, kv KV, secret string, files map[string][]byte) (stored map[string][]byte, won bool, err error) {
	blob, err := Seal(secret, files)
	if err != nil {
		return nil, false, err
	}
	_, err = kv.Create(ctx, Key(secret), blob)
	switch {
	case err == nil:
		return files, true, nil
	case !errors.Is(err, store.ErrExists):
		return nil, false, fmt.Errorf("bootstrap data: store: %w", err)
	}
	stored, found, err := Fetch(ctx, kv, secret)
	if err == nil && !found {
		err = errors.New("bootstrap data: created by another server, then gone")
	}
	return stored, false, err
}
