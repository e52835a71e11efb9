package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type testFlags struct {
	fs      *pflag.FlagSet
	dataDir *string
	server  *string
	token   *string
	port    *int
	every   *time.Duration
	labels  *[]string
	debug   *bool
}

func newTestFlags() testFlags {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("config", defaultConfigFile, "")
	return testFlags{
		fs:      fs,
		dataDir: fs.String("data-dir", "/var/lib/skiff", ""),
		server:  fs.String("server", "", ""),
		token:   fs.String("token", "", ""),
		port:    fs.Int("https-listen-port", 6443, ""),
		every:   fs.Duration("compact-interval", 5*time.Minute, ""),
		labels:  fs.StringSlice("node-label", nil, ""),
		debug:   fs.Bool("debug", false, ""),
	}
}

func TestResolveFlags_Precedence_CommandLineThenEnvThenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(file, []byte(`
data-dir: /from/file
server: https://file:6443
token: file-token
https-listen-port: 7443
compact-interval: 90s
node-label: [a=1, b=2]
debug: true
`), 0o600)
	cases := []struct {
		name      string
		args      []string
		env       map[string]string
		wantDir   string
		wantSrv   string
		wantToken string
	}{
		{"file fills unset flags", []string{"--config", file}, nil, "/from/file", "https://file:6443", "file-token"},
		{"env beats file", []string{"--config", file}, map[string]string{"SKIFF_URL": "https://env:6443", "SKIFF_TOKEN": "env-token"}, "/from/file", "https://env:6443", "env-token"},
		{"command line beats env and file", []string{"--config", file, "--server", "https://cli:6443", "--data-dir", "/cli"}, map[string]string{"SKIFF_URL": "https://env:6443"}, "/cli", "https://cli:6443", "file-token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newTestFlags()
			if err := f.fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if err := resolveFlags(f.fs, func(k string) string { return c.env[k] }); err != nil {
				t.Fatal(err)
			}
			if *f.dataDir != c.wantDir || *f.server != c.wantSrv || *f.token != c.wantToken {
				t.Fatalf("got data-dir %q server %q token %q", *f.dataDir, *f.server, *f.token)
			}
			if *f.port != 7443 || *f.every != 90*time.Second || !*f.debug || strings.Join(*f.labels, ",") != "a=1,b=2" {
				t.Fatalf("typed values: port %d interval %v debug %v labels %v", *f.port, *f.every, *f.debug, *f.labels)
			}
		})
	}
}

func TestResolveFlags_BadConfig_ClearError(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown key", "data-dri: /x\n", `unknown key "data-dri"`},
		{"bad type", "https-listen-port: lots\n", `key "https-listen-port"`},
		{"mapping value", "data-dir: {a: b}\n", "got a mapping"},
		{"not yaml", "data-dir: [\n", "config file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.yaml")
			os.WriteFile(file, []byte(c.yaml), 0o600)
			f := newTestFlags()
			f.fs.Parse([]string{"--config", file})
			err := resolveFlags(f.fs, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestResolveFlags_MissingFile_OnlyAnErrorWhenAskedFor(t *testing.T) {
	f := newTestFlags()
	f.fs.Parse([]string{"--config", "/nonexistent/skiff.yaml"})
	if err := resolveFlags(f.fs, func(string) string { return "" }); err == nil {
		t.Fatal("an explicit --config that does not exist must be an error")
	}
}
