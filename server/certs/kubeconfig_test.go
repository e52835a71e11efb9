package certs

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteKubeconfig(t *testing.T) {
	const server = "https://127.0.0.1:6443"
	ca, cert, key := []byte("ca-pem"), []byte("cert-pem"), []byte("key-pem")
	tests := []struct {
		name     string
		existing os.FileMode // 0: no file before
		mode     os.FileMode
		wantMode os.FileMode
	}{
		{"new file, mode 0 means 0600", 0, 0, 0o600},
		{"new file, explicit 0644", 0, 0o644, 0o644},
		{"existing 0644 file is tightened to 0600", 0o644, 0, 0o600},
		{"existing 0600 file is opened to the asked 0640", 0o600, 0o640, 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rancher", "skiff", "skiff.yaml")
			if tt.existing != 0 {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("old: true\n"), tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteKubeconfig(path, tt.mode, server, ca, cert, key); err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got != tt.wantMode {
				t.Errorf("mode = %o, want %o", got, tt.wantMode)
			}
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CurrentContext != "default" {
				t.Errorf("current-context = %q", cfg.CurrentContext)
			}
			ctx := cfg.Contexts["default"]
			cl := cfg.Clusters["default"]
			user := cfg.AuthInfos["default"]
			if ctx == nil || cl == nil || user == nil {
				t.Fatalf("missing default entries: %+v", cfg)
			}
			if ctx.Cluster != "default" || ctx.AuthInfo != "default" {
				t.Errorf("context = %+v", ctx)
			}
			if cl.Server != server || string(cl.CertificateAuthorityData) != "ca-pem" {
				t.Errorf("cluster = %q / %q", cl.Server, cl.CertificateAuthorityData)
			}
			if string(user.ClientCertificateData) != "cert-pem" || string(user.ClientKeyData) != "key-pem" {
				t.Errorf("user data = %q / %q", user.ClientCertificateData, user.ClientKeyData)
			}
		})
	}
}
