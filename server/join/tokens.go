package join

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"skiff/jointoken"
)

// Bootstrap-token Secrets, as upstream's bootstrap tokens.
const (
	BootstrapTokenType   corev1.SecretType = "bootstrap.kubernetes.io/token"
	bootstrapTokenPrefix                   = "bootstrap-token-"
	keyTokenID                             = "token-id"
	keyTokenSecret                         = "token-secret"
	keyExpiration                          = "expiration"
	keyDescription                         = "description"
	keyUsageAuth                           = "usage-bootstrap-authentication"
)

// BootstrapSecretName is the kube-system Secret of bootstrap token id.
func BootstrapSecretName(id string) string { return bootstrapTokenPrefix + id }

// checkBootstrapToken accepts tok if its Secret exists, holds the same
// secret, is meant for authentication and has not expired.
func (h *Handler) checkBootstrapToken(ctx context.Context, tok jointoken.Token) error {
	s, err := h.cfg.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, BootstrapSecretName(tok.ID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return apierrors.NewUnauthorized(fmt.Sprintf("join: token %s does not exist (deleted, or expired and removed)", tok.ID))
	}
	if err != nil {
		return fmt.Errorf("join: read token %s: %w", tok.ID, err)
	}
	if s.Type != BootstrapTokenType || string(s.Data[keyTokenID]) != tok.ID ||
		subtle.ConstantTimeCompare(s.Data[keyTokenSecret], []byte(tok.Secret)) != 1 {
		return apierrors.NewUnauthorized(fmt.Sprintf("join: the secret of token %s is not valid", tok.ID))
	}
	if string(s.Data[keyUsageAuth]) != "true" {
		return apierrors.NewUnauthorized(fmt.Sprintf("join: token %s is not meant for authentication", tok.ID))
	}
	if exp, ok := expiration(s); ok && !h.cfg.Now().Before(exp) {
		return apierrors.NewUnauthorized(fmt.Sprintf("join: token %s expired at %s", tok.ID, exp.UTC().Format(time.RFC3339)))
	}
	return nil
}

// expiration reads a token Secret's expiry; ok is false for tokens that
// never expire. An unreadable expiration counts as expired long ago.
func expiration(s *corev1.Secret) (time.Time, bool) {
	v := string(s.Data[keyExpiration])
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Unix(0, 0), true
	}
	return t, true
}

// TokenInfo describes one extra join token.
type TokenInfo struct {
	ID          string
	Description string
	// Expires is zero for a token that never expires.
	Expires time.Time
}

// CreateToken stores a new bootstrap token valid for ttl (0: forever) and
// returns it in full: K10<hash of caPEM>::<id>.<secret>.
func CreateToken(ctx context.Context, c kubernetes.Interface, caPEM []byte, ttl time.Duration, description string) (string, error) {
	id, secret, err := jointoken.NewBootstrap()
	if err != nil {
		return "", err
	}
	data := map[string][]byte{keyTokenID: []byte(id), keyTokenSecret: []byte(secret), keyUsageAuth: []byte("true")}
	if description != "" {
		data[keyDescription] = []byte(description)
	}
	if ttl > 0 {
		data[keyExpiration] = []byte(time.Now().Add(ttl).UTC().Format(time.RFC3339))
	}
	_, err = c.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: BootstrapSecretName(id), Namespace: metav1.NamespaceSystem},
		Type:       BootstrapTokenType,
		Data:       data,
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	return jointoken.Token{CAHash: jointoken.CAHash(caPEM), ID: id, Secret: secret}.String(), nil
}

// ListTokens returns the extra join tokens, by id.
func ListTokens(ctx context.Context, c kubernetes.Interface) ([]TokenInfo, error) {
	list, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(BootstrapTokenType)})
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	var out []TokenInfo
	for i := range list.Items {
		s := &list.Items[i]
		if s.Type != BootstrapTokenType || !strings.HasPrefix(s.Name, bootstrapTokenPrefix) {
			continue
		}
		info := TokenInfo{ID: string(s.Data[keyTokenID]), Description: string(s.Data[keyDescription])}
		info.Expires, _ = expiration(s)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteToken deletes a join token given its id or the whole token.
func DeleteToken(ctx context.Context, c kubernetes.Interface, idOrToken string) error {
	id := idOrToken
	if !jointoken.ValidID(id) {
		tok, err := jointoken.Parse(idOrToken)
		if err != nil || tok.IsServer() {
			return fmt.Errorf("delete token: %q is neither a token id nor a bootstrap token", idOrToken)
		}
		id = tok.ID
	}
	err := c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, BootstrapSecretName(id), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("delete token: token %s does not exist", id)
	}
	if err != nil {
		return fmt.Errorf("delete token %s: %w", id, err)
	}
	return nil
}

// RunCleaner deletes expired bootstrap tokens every interval until ctx
// ends.
func RunCleaner(ctx context.Context, c kubernetes.Interface, interval time.Duration, now func() time.Time, log *slog.Logger) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := DeleteExpired(ctx, c, now()); err != nil && ctx.Err() == nil {
			log.Warn("cleaning expired join tokens", "err", err)
		} else if n > 0 {
			log.Info("deleted expired join tokens", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DeleteExpired deletes the bootstrap tokens expired at now.
func DeleteExpired(ctx context.Context, c kubernetes.Interface, now time.Time) (int, error) {
	list, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(BootstrapTokenType)})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		s := &list.Items[i]
		if exp, ok := expiration(s); s.Type == BootstrapTokenType && ok && !now.Before(exp) {
			err := c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, s.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &s.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
