package join

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"skiff/jointoken"
)

// ServerTokenPath is where the full server token is kept.
func ServerTokenPath(dataDir string) string {
	return filepath.Join(dataDir, "server", "token")
}

// EnsureServerToken returns the server token for a CA whose hash is
// caHash and keeps it, in full (K10<hash>::server:<secret>), in
// <dataDir>/server/token (0600). configured is --token: a full token (whose
// hash must then be caHash) or a bare secret; "" keeps the stored secret,
// or generates one on first start.
func EnsureServerToken(dataDir, configured, caHash string) (jointoken.Token, error) {
	secret, tokHash, err := ServerSecret(dataDir, configured)
	if err != nil {
		return jointoken.Token{}, err
	}
	if tokHash != "" && tokHash != caHash {
		return jointoken.Token{}, fmt.Errorf("--token: its CA hash %s does not match this server's CA (%s)", short(tokHash), short(caHash))
	}
	if secret == "" {
		if secret, err = jointoken.NewSecret(); err != nil {
			return jointoken.Token{}, err
		}
	}
	tok := jointoken.Token{CAHash: caHash, ID: jointoken.ServerID, Secret: secret}
	if err := writeIfChanged(ServerTokenPath(dataDir), tok.String()+"\n"); err != nil {
		return jointoken.Token{}, err
	}
	return tok, nil
}

// ServerSecret is the server token's secret before the CA is known:
// configured (--token, full or bare; caHash is then the hash a full token
// names) or the one kept in <dataDir>/server/token; "" when there is
// neither (a first start without --token).
func ServerSecret(dataDir, configured string) (secret, caHash string, err error) {
	if configured != "" {
		tok, err := jointoken.Parse(configured)
		if err != nil {
			return "", "", fmt.Errorf("--token: %w", err)
		}
		if !tok.IsServer() {
			return "", "", errors.New("--token: a server's token must be K10<hash>::server:<secret> or a bare secret, not a bootstrap token")
		}
		return tok.Secret, tok.CAHash, nil
	}
	path := ServerTokenPath(dataDir)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("read server token: %w", err)
	}
	tok, err := jointoken.Parse(string(data))
	if err != nil || !tok.IsServer() {
		return "", "", fmt.Errorf("%s: not a server token (remove it to make a new one): %v", path, err)
	}
	return tok.Secret, "", nil
}

func writeIfChanged(path, content string) error {
	if have, err := os.ReadFile(path); err == nil && string(have) == content {
		return os.Chmod(path, 0o600)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write server token: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("write server token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write server token: %w", err)
	}
	return nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return "sha256 " + hash[:12] + "…"
	}
	return strings.TrimSpace("sha256 " + hash)
}
