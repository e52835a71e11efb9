package volumes

import (
	"context"
	"fmt"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	defaultTokenSeconds = 3600
	// maxTokenAge is how long a token is kept at most, whatever its TTL.
	maxTokenAge = 24 * time.Hour
)

// tokenEntry is a service-account token the manager requested.
type tokenEntry struct {
	token   string
	issued  time.Time
	expires time.Time
}

// needsRefresh follows the kubelet's token manager: refresh once 80% of
// the lifetime has passed, when the token is older than 24 h, or expired.
func (e tokenEntry) needsRefresh(now time.Time) bool {
	if !now.Before(e.expires) {
		return true
	}
	if now.Sub(e.issued) > maxTokenAge {
		return true
	}
	ttl := e.expires.Sub(e.issued)
	return now.After(e.issued.Add(ttl * 8 / 10))
}

// token returns a bound token for the pod's service account, requesting a
// new one when there is none cached under key or it needs a refresh. A
// failed refresh keeps a cached token that has not expired yet.
func (m *Manager) token(ctx context.Context, pod *corev1.Pod, key string, src *corev1.ServiceAccountTokenProjection) (string, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	cached, ok := m.tokens[key]
	m.mu.Unlock()
	if ok && !cached.needsRefresh(now) {
		return cached.token, nil
	}
	seconds := int64(defaultTokenSeconds)
	if src.ExpirationSeconds != nil && *src.ExpirationSeconds > 0 {
		seconds = *src.ExpirationSeconds
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := m.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err == nil && tr.Status.Token == "" {
		err = fmt.Errorf("empty token in response")
	}
	if err != nil {
		if ok && now.Before(cached.expires) {
			m.log.Warn("service account token refresh failed; keeping the current one",
				"pod", pod.Namespace+"/"+pod.Name, "serviceAccount", sa, "err", err)
			return cached.token, nil
		}
		return "", fmt.Errorf("request token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	e := tokenEntry{token: tr.Status.Token, issued: now, expires: tr.Status.ExpirationTimestamp.Time}
	if e.expires.IsZero() || !e.expires.After(now) {
		e.expires = now.Add(time.Duration(seconds) * time.Second)
	}
	m.mu.Lock()
	m.tokens[key] = e
	m.mu.Unlock()
	return e.token, nil
}
