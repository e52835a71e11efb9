package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The ConfigMap in which kube-apiserver publishes how it proxies identity to
// aggregated servers, and its keys (upstream's
// authentication_dynamic_request_header.go).
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"

	keyClientCA     = "requestheader-client-ca-file"
	keyAllowedNames = "requestheader-allowed-names"
	keyUserHeaders  = "requestheader-username-headers"
	keyUIDHeaders   = "requestheader-uid-headers"
	keyGroupHeaders = "requestheader-group-headers"
	keyExtraPrefix  = "requestheader-extra-headers-prefix"
)

var (
	// errNoProxyCert: the request carries no client certificate the
	// requestheader CA signed for an allowed name, so its identity headers
	// are not to be believed.
	errNoProxyCert = errors.New("no trusted front-proxy client certificate")
	// errNoUser: a trusted proxy sent no user name.
	errNoUser = errors.New("no user name in the request headers")
	// errNoAuthConfig: the authentication ConfigMap has not been read yet.
	errNoAuthConfig = errors.New("requestheader configuration not loaded yet")
)

// RequestHeaderConfig is the parsed requestheader part of the
// extension-apiserver-authentication ConfigMap.
type RequestHeaderConfig struct {
	CA           *x509.CertPool
	AllowedNames []string
	UserHeaders  []string
	UIDHeaders   []string
	GroupHeaders []string
	ExtraPrefix  []string
}

// parseAuthConfigMap reads the requestheader keys; the header lists are JSON
// string arrays, as kube-apiserver writes them.
func parseAuthConfigMap(cm *corev1.ConfigMap) (*RequestHeaderConfig, error) {
	caPEM := cm.Data[keyClientCA]
	if caPEM == "" {
		return nil, fmt.Errorf("configmap %s/%s has no %s", cm.Namespace, cm.Name, keyClientCA)
	}
	cfg := &RequestHeaderConfig{CA: x509.NewCertPool()}
	if !cfg.CA.AppendCertsFromPEM([]byte(caPEM)) {
		return nil, fmt.Errorf("configmap %s/%s: %s holds no PEM certificate", cm.Namespace, cm.Name, keyClientCA)
	}
	for key, dst := range map[string]*[]string{
		keyAllowedNames: &cfg.AllowedNames, keyUserHeaders: &cfg.UserHeaders, keyUIDHeaders: &cfg.UIDHeaders,
		keyGroupHeaders: &cfg.GroupHeaders, keyExtraPrefix: &cfg.ExtraPrefix,
	} {
		v := cm.Data[key]
		if v == "" {
			continue
		}
		if err := json.Unmarshal([]byte(v), dst); err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %s: %w", cm.Namespace, cm.Name, key, err)
		}
	}
	if len(cfg.UserHeaders) == 0 {
		return nil, fmt.Errorf("configmap %s/%s: %s is empty: no identity could be proxied", cm.Namespace, cm.Name, keyUserHeaders)
	}
	return cfg, nil
}

// configMapGetter is the part of client-go's ConfigMapInterface this server
// uses.
type configMapGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
}

// loadAuthConfig reads and parses the authentication ConfigMap.
func loadAuthConfig(ctx context.Context, cms configMapGetter) (*RequestHeaderConfig, error) {
	cm, err := cms.Get(ctx, authConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get configmap %s/%s: %w", authConfigMapNamespace, authConfigMapName, err)
	}
	return parseAuthConfigMap(cm)
}

// authenticate is upstream's request-header authenticator behind its x509
// verifier: the client certificate must chain to the requestheader CA for
// client auth and, when allowed names are set, carry one of them as its
// CN; then the user is the first non-empty user header, groups every group
// header value, extra every prefixed header (key lower-cased and
// %-unescaped).
func authenticate(r *http.Request, cfg *RequestHeaderConfig) (authenticationv1.UserInfo, error) {
	if cfg == nil {
		return authenticationv1.UserInfo{}, errNoAuthConfig
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return authenticationv1.UserInfo{}, fmt.Errorf("%w: none presented", errNoProxyCert)
	}
	leaf := r.TLS.PeerCertificates[0]
	opts := x509.VerifyOptions{Roots: cfg.CA, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range r.TLS.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("%w: %w", errNoProxyCert, err)
	}
	if len(cfg.AllowedNames) > 0 && !contains(cfg.AllowedNames, leaf.Subject.CommonName) {
		return authenticationv1.UserInfo{}, fmt.Errorf("%w: subject with cn=%s is not in the allowed list", errNoProxyCert, leaf.Subject.CommonName)
	}
	u := authenticationv1.UserInfo{Username: firstValue(r.Header, cfg.UserHeaders)}
	if u.Username == "" {
		return authenticationv1.UserInfo{}, errNoUser
	}
	u.UID = firstValue(r.Header, cfg.UIDHeaders)
	u.Groups = allValues(r.Header, cfg.GroupHeaders)
	u.Extra = extraValues(r.Header, cfg.ExtraPrefix)
	return u, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func firstValue(h http.Header, names []string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func allValues(h http.Header, names []string) []string {
	out := []string{}
	for _, n := range names {
		for _, v := range h.Values(n) {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

func extraValues(h http.Header, prefixes []string) map[string]authenticationv1.ExtraValue {
	out := map[string]authenticationv1.ExtraValue{}
	for _, p := range prefixes {
		for name, vv := range h {
			if len(name) < len(p) || !strings.EqualFold(name[:len(p)], p) {
				continue
			}
			key := strings.ToLower(name[len(p):])
			if k, err := url.PathUnescape(key); err == nil {
				key = k
			}
			out[key] = append(out[key], vv...)
		}
	}
	return out
}
