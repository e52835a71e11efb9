package images

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"busybox", "docker.io/library/busybox:latest"},
		{"busybox:1.36", "docker.io/library/busybox:1.36"},
		{"library/busybox", "docker.io/library/busybox:latest"},
		{"docker.io/busybox", "docker.io/library/busybox:latest"},
		{"user/app:v1", "docker.io/user/app:v1"},
		{"registry:5000/app", "registry:5000/app:latest"},
		{"quay.io/x/y@sha256:" + strings.Repeat("a", 64), "quay.io/x/y@sha256:" + strings.Repeat("a", 64)},
		{"not valid!", "not valid!"},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOCIRefNameNormalizesReferencesAndIgnoresBareTags(t *testing.T) {
	tests := []struct{ in, want string }{
		{"docker.io/library/busybox:latest", "docker.io/library/busybox:latest"},
		{"busybox:1.36", "docker.io/library/busybox:1.36"},
		{"example.com/app", "example.com/app:latest"},
		{"latest", ""},
		{"1.36", ""},
	}
	for _, tt := range tests {
		if got := ociRefName(tt.in); got != tt.want {
			t.Errorf("ociRefName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDecompressDetectsTheFormat(t *testing.T) {
	payload := []byte("a tar stream would be here")
	var gz, zs bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(payload)
	zw.Close()
	ze, _ := zstd.NewWriter(&zs)
	ze.Write(payload)
	ze.Close()
	tests := []struct {
		name string
		in   []byte
	}{
		{"plain", payload},
		{"gzip", gz.Bytes()},
		{"zstd", zs.Bytes()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, done, err := decompress(bytes.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, payload) {
				t.Errorf("got %q, %v", got, err)
			}
		})
	}
}

const registriesYAML = `
mirrors:
  docker.io:
    endpoint:
      - "https://mirror:5000"
      - "http://plain.local/prefix/"
  "*":
    endpoint: ["https://catchall"]
configs:
  "mirror:5000":
    auth:
      username: alice
      password: secret
    tls:
      insecure_skip_verify: true
  "registry-1.docker.io":
    auth:
      auth: ` + "Ym9iOmh1bnRlcjI=" + `
  "token.example":
    auth:
      identitytoken: tok
`

func writeRegistries(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadRegistries(t *testing.T) {
	tests := []struct {
		name     string
		path     func(t *testing.T) string
		wantErr  bool
		mirrors  int
		wantAuth string
	}{
		{name: "k3s file", path: func(t *testing.T) string { return writeRegistries(t, registriesYAML) }, mirrors: 2, wantAuth: "alice"},
		{name: "no path", path: func(*testing.T) string { return "" }},
		{name: "missing file", path: func(t *testing.T) string { return filepath.Join(t.TempDir(), "none.yaml") }},
		{name: "bad endpoint", path: func(t *testing.T) string {
			return writeRegistries(t, "mirrors:\n  docker.io:\n    endpoint: [\"ftp://x\"]\n")
		}, wantErr: true},
		{name: "not yaml", path: func(t *testing.T) string { return writeRegistries(t, "mirrors: [") }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			regs, err := LoadRegistries(tt.path(t))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if len(regs.Mirrors) != tt.mirrors {
				t.Errorf("%d mirrors, want %d", len(regs.Mirrors), tt.mirrors)
			}
			if tt.wantAuth != "" {
				if u, _, _ := regs.Configs["mirror:5000"].Auth.credentials(); u != tt.wantAuth {
					t.Errorf("user %q, want %q", u, tt.wantAuth)
				}
			}
		})
	}
}

func TestHostsListMirrorsThenTheRegistry(t *testing.T) {
	regs, err := LoadRegistries(writeRegistries(t, registriesYAML))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		registry string
		want     []string
	}{
		{"docker.io", []string{"https://mirror:5000/v2", "http://plain.local/prefix/v2", "https://registry-1.docker.io/v2"}},
		{"quay.io", []string{"https://catchall/v2", "https://quay.io/v2"}},
	}
	for _, tt := range tests {
		hosts, err := regs.hosts(nil)(tt.registry)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hosts {
			got = append(got, h.Scheme+"://"+h.Host+h.Path)
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: hosts %v, want %v", tt.registry, got, tt.want)
		}
	}
	local, err := (&Registries{}).hosts(nil)("localhost:5000")
	if err != nil || len(local) != 1 || local[0].Scheme != "http" {
		t.Errorf("localhost registry: %+v, %v; want plain http", local, err)
	}
}

func TestAuthCredentials(t *testing.T) {
	tests := []struct {
		name         string
		auth         *AuthConfig
		wantU, wantP string
		wantErr      bool
	}{
		{name: "none", auth: nil},
		{name: "username and password", auth: &AuthConfig{Username: "a", Password: "b"}, wantU: "a", wantP: "b"},
		{name: "base64 auth", auth: &AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte("bob:hunter2"))}, wantU: "bob", wantP: "hunter2"},
		{name: "identity token", auth: &AuthConfig{IdentityToken: "tok"}, wantP: "tok"},
		{name: "bad base64", auth: &AuthConfig{Auth: "!!"}, wantErr: true},
		{name: "auth without colon", auth: &AuthConfig{Auth: base64.StdEncoding.EncodeToString([]byte("bob"))}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, p, err := tt.auth.credentials()
			if (err != nil) != tt.wantErr || u != tt.wantU || p != tt.wantP {
				t.Errorf("got %q %q %v", u, p, err)
			}
		})
	}
}

func TestCredentialHostMatchesDockerHubAliases(t *testing.T) {
	tests := []struct {
		registry, host string
		want           bool
	}{
		{"https://index.docker.io/v1/", "registry-1.docker.io", true},
		{"docker.io", "registry-1.docker.io", true},
		{"registry:5000", "registry:5000", true},
		{"http://registry:5000/", "registry:5000", true},
		{"registry:5000", "registry:5001", false},
		{"quay.io", "registry-1.docker.io", false},
	}
	for _, tt := range tests {
		if got := sameHost(credentialHost(tt.registry), tt.host); got != tt.want {
			t.Errorf("%s vs %s: %v, want %v", tt.registry, tt.host, got, tt.want)
		}
	}
}

func TestTLSConfigRejectsAMissingCAFile(t *testing.T) {
	_, err := (&TLSConfig{CAFile: "/nonexistent/ca.pem"}).clientConfig()
	if err == nil {
		t.Fatal("want an error")
	}
	cfg, err := (&TLSConfig{InsecureSkipVerify: true}).clientConfig()
	if err != nil || !cfg.InsecureSkipVerify {
		t.Fatalf("got %+v, %v", cfg, err)
	}
}
