package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/e2e/testimages/testpki"
)

// authConfigMap is the ConfigMap kube-apiserver would publish for front
// proxy CA fp, with the standard header names.
func authConfigMap(fp *testpki.CA, allowed string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: authConfigMapNamespace, Name: authConfigMapName},
		Data: map[string]string{
			keyClientCA:      string(fp.PEM),
			keyAllowedNames:  allowed,
			keyUserHeaders:   `["X-Remote-User"]`,
			keyUIDHeaders:    `["X-Remote-Uid"]`,
			keyGroupHeaders:  `["X-Remote-Group"]`,
			keyExtraPrefix:   `["X-Remote-Extra-"]`,
			"client-ca-file": "ignored here",
		},
	}
}

func mustParse(t *testing.T, cm *corev1.ConfigMap) *RequestHeaderConfig {
	t.Helper()
	cfg, err := parseAuthConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestParseAuthConfigMap_Keys(t *testing.T) {
	fp := testpki.NewCA(t, "front-proxy-ca")
	cfg := mustParse(t, authConfigMap(fp, `["front-proxy-client","other"]`))
	if !reflect.DeepEqual(cfg.AllowedNames, []string{"front-proxy-client", "other"}) || !reflect.DeepEqual(cfg.UserHeaders, []string{"X-Remote-User"}) ||
		!reflect.DeepEqual(cfg.GroupHeaders, []string{"X-Remote-Group"}) || !reflect.DeepEqual(cfg.ExtraPrefix, []string{"X-Remote-Extra-"}) ||
		!reflect.DeepEqual(cfg.UIDHeaders, []string{"X-Remote-Uid"}) {
		t.Errorf("parsed %+v", cfg)
	}
	bad := []struct {
		name   string
		change func(d map[string]string)
		want   string
	}{
		{"no CA", func(d map[string]string) { delete(d, keyClientCA) }, "has no requestheader-client-ca-file"},
		{"CA not PEM", func(d map[string]string) { d[keyClientCA] = "junk" }, "holds no PEM certificate"},
		{"header list not JSON", func(d map[string]string) { d[keyGroupHeaders] = "X-Remote-Group" }, "requestheader-group-headers"},
		{"no user headers", func(d map[string]string) { d[keyUserHeaders] = "[]" }, "requestheader-username-headers is empty"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			cm := authConfigMap(fp, "")
			tc.change(cm.Data)
			if _, err := parseAuthConfigMap(cm); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// proxied is a request as the aggregator sends it: its client certificate
// (if any) and identity headers.
func proxied(path string, cert *tls.Certificate, chain ...*x509.Certificate) *http.Request {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.TLS = &tls.ConnectionState{}
	if cert != nil {
		r.TLS.PeerCertificates = append([]*x509.Certificate{cert.Leaf}, chain...)
	}
	r.Header.Set("X-Remote-User", "alice")
	r.Header.Set("X-Remote-Uid", "uid-1")
	r.Header.Add("X-Remote-Group", "devs")
	r.Header.Add("X-Remote-Group", "system:authenticated")
	r.Header.Add("X-Remote-Extra-Scopes", "a")
	r.Header.Add("X-Remote-Extra-Scopes", "b")
	r.Header.Set("X-Remote-Extra-Example.com%2fteam", "blue")
	return r
}

func TestAuthenticate_ProxyCertificate_OnlyTrustedAllowedNames(t *testing.T) {
	fp, other := testpki.NewCA(t, "front-proxy-ca"), testpki.NewCA(t, "other-ca")
	proxy := fp.Issue(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	stranger := fp.Issue(t, "someone-else", x509.ExtKeyUsageClientAuth)
	serverOnly := fp.Issue(t, "front-proxy-client", x509.ExtKeyUsageServerAuth)
	forged := other.Issue(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	restricted := mustParse(t, authConfigMap(fp, `["front-proxy-client"]`))
	anyName := mustParse(t, authConfigMap(fp, ""))
	cases := []struct {
		name    string
		cfg     *RequestHeaderConfig
		cert    *tls.Certificate
		wantErr error
	}{
		{"allowed CN from the CA", restricted, &proxy, nil},
		{"no certificate", restricted, nil, errNoProxyCert},
		{"CN not allowed", restricted, &stranger, errNoProxyCert},
		{"any CN when no names are listed", anyName, &stranger, nil},
		{"certificate of another CA", restricted, &forged, errNoProxyCert},
		{"server-auth certificate", restricted, &serverOnly, errNoProxyCert},
		{"configuration not loaded", nil, &proxy, errNoAuthConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := authenticate(proxied("/apis", tc.cert), tc.cfg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && u.Username != "alice" {
				t.Errorf("user %q, want alice", u.Username)
			}
		})
	}
}

func TestAuthenticate_Headers_AsUpstream(t *testing.T) {
	fp := testpki.NewCA(t, "front-proxy-ca")
	proxy := fp.Issue(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	cfg := mustParse(t, authConfigMap(fp, `["front-proxy-client"]`))
	u, err := authenticate(proxied("/apis", &proxy), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := authenticationv1.UserInfo{
		Username: "alice", UID: "uid-1", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a", "b"}, "example.com/team": {"blue"}},
	}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("identity %+v\nwant %+v", u, want)
	}

	// Header names come from the ConfigMap; the first non-empty user
	// header wins.
	custom := *cfg
	custom.UserHeaders = []string{"X-Empty", "X-Who"}
	custom.GroupHeaders = []string{"X-Teams"}
	r := proxied("/apis", &proxy)
	r.Header.Set("X-Empty", "")
	r.Header.Set("X-Who", "bob")
	r.Header.Set("X-Teams", "ops")
	if u, err = authenticate(r, &custom); err != nil || u.Username != "bob" || !reflect.DeepEqual(u.Groups, []string{"ops"}) {
		t.Errorf("custom headers: %+v, %v; want bob in ops", u, err)
	}

	r = proxied("/apis", &proxy)
	r.Header.Del("X-Remote-User")
	if _, err := authenticate(r, cfg); !errors.Is(err, errNoUser) {
		t.Errorf("no user header: err = %v, want errNoUser", err)
	}
}

// fakeConfigMaps serves one ConfigMap, replaceable while running.
type fakeConfigMaps struct {
	cm chan *corev1.ConfigMap
}

func newFakeConfigMaps(cm *corev1.ConfigMap) *fakeConfigMaps {
	f := &fakeConfigMaps{cm: make(chan *corev1.ConfigMap, 1)}
	f.cm <- cm
	return f
}

func (f *fakeConfigMaps) set(cm *corev1.ConfigMap) {
	<-f.cm
	f.cm <- cm
}

func (f *fakeConfigMaps) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	cm := <-f.cm
	f.cm <- cm
	if cm == nil || name != cm.Name {
		return nil, errors.New("configmaps \"" + name + "\" not found")
	}
	return cm.DeepCopy(), nil
}
