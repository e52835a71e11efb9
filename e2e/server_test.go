package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func startServer(t *testing.T, dataDir string, port int) *proc {
	t.Helper()
	return start(t, "server", "--data-dir", dataDir, "--bind-address", "127.0.0.1",
		"--https-listen-port", strconv.Itoa(port), "--write-kubeconfig", filepath.Join(dataDir, "kubeconfig.yaml"))
}

func TestServer_ServesHealthz_StopsCleanlyOnSignal_RestartsOnItsData(t *testing.T) {
	dataDir := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		port := freePort(t)
		p := startServer(t, dataDir, port)
		waitHealthy(t, p, port)
		if err := p.stop(t, sig, 15*time.Second); err != nil {
			t.Fatalf("exit after %v: %v, want a clean exit; output:\n%s", sig, err, p.output())
		}
		if _, err := os.Stat(filepath.Join(dataDir, "server", "db", "state.db")); err != nil {
			t.Fatalf("store file: %v", err)
		}
	}
}

func TestServer_ConfigFile_SetsFlags(t *testing.T) {
	port := freePort(t)
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("data-dir: "+dataDir+"\nbind-address: 127.0.0.1\nhttps-listen-port: "+strconv.Itoa(port)+
		"\nwrite-kubeconfig: "+filepath.Join(dataDir, "kc.yaml")+"\nwrite-kubeconfig-mode: \"0640\"\n"), 0o600)
	p := start(t, "server", "--config", cfg)
	waitHealthy(t, p, port)
	if _, err := os.Stat(filepath.Join(dataDir, "server", "db", "state.db")); err != nil {
		t.Fatalf("data-dir from the config file not used: %v", err)
	}
	st, err := os.Stat(filepath.Join(dataDir, "kc.yaml"))
	if err != nil {
		t.Fatalf("kubeconfig path from the config file not used: %v", err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Fatalf("kubeconfig mode %v, want 0640 from the config file", st.Mode().Perm())
	}
}

func TestServer_BadConfig_FailsWithClearError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(bad, []byte("data-dri: /tmp/x\n"), 0o600)
	cases := []struct {
		name, config, want string
	}{
		{"unknown key", bad, `unknown key "data-dri"`},
		{"missing file", filepath.Join(t.TempDir(), "absent.yaml"), "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, "server", "--config", c.config)
			if err := p.wait(t, 30*time.Second); err == nil || !strings.Contains(p.output(), c.want) {
				t.Fatalf("exit %v, output %q, want it to mention %q", exitCode(err), p.output(), c.want)
			}
		})
	}
}

func TestVersion_PrintsVersionCommitAndGo(t *testing.T) {
	p := start(t, "version")
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^skiff version \S+ \(commit \S+\)\ngo version go1\.\d+`)
	if !re.MatchString(p.output()) {
		t.Fatalf("version output %q", p.output())
	}
}

func TestAgent_ValidatesJoinFlags_BeforeTouchingAnything(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no server", []string{"agent", "--token", "x"}, nil, "--server"},
		{"plain http server", []string{"agent", "--server", "http://10.0.0.1:6443", "--token", "x"}, nil, "want https://host:port"},
		{"no token", []string{"agent", "--server", "https://10.0.0.1:6443"}, nil, "--token"},
		{"token from env without a CA hash", []string{"agent", "--data-dir", t.TempDir()}, []string{"SKIFF_URL=https://10.0.0.1:6443", "SKIFF_TOKEN=x"}, "the token has no CA hash"},
		{"bad network backend", []string{"agent", "--server", "https://10.0.0.1:6443", "--token", "x", "--network-backend", "flannel"}, nil, "want vxlan, host-gw or none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startEnv(t, c.env, c.args...)
			if err := p.wait(t, 30*time.Second); exitCode(err) != "1" || !strings.Contains(p.output(), c.want) {
				t.Fatalf("exit %v, output %q, want exit 1 mentioning %q", exitCode(err), p.output(), c.want)
			}
		})
	}
}
