package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestConfigPointsEverythingUnderDir(t *testing.T) {
	p, err := newPaths("/tmp/cdx")
	if err != nil {
		t.Fatal(err)
	}
	text, err := configTOML(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"version = 4",
		`root = "/tmp/cdx/root"`,
		`state = "/tmp/cdx/state"`,
		`address = "/tmp/cdx/containerd.sock"`,
		`address = "/tmp/cdx/containerd.sock.ttrpc"`,
		`path = "/tmp/cdx/opt"`,
		`socket_dir = "/tmp/cdx/s"`,
		`"io.containerd.grpc.v1.cri"`,
		`"io.containerd.ttrpc.v1.task"`,
		"disable = true",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("config lacks %s:\n%s", want, text)
		}
	}
}

func TestPaths(t *testing.T) {
	tests := []struct {
		name           string
		dir            string
		wantErr        bool
		wantShimSocket string
	}{
		{name: "short dir keeps shim sockets inside", dir: "/tmp/cd1", wantShimSocket: "/tmp/cd1/s"},
		{name: "long dir uses containerd's default shim socket dir", dir: "/var/lib/skiff-with-a-long-name/agent/containerd", wantShimSocket: ""},
		{name: "empty dir is an error", dir: "", wantErr: true},
		{name: "socket beyond the unix limit is an error", dir: "/" + strings.Repeat("x", 90), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newPaths(tt.dir)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && p.shimSockets != tt.wantShimSocket {
				t.Errorf("shim socket dir %q, want %q", p.shimSockets, tt.wantShimSocket)
			}
		})
	}
}

func TestTOMLStringEscapesQuotesAndRejectsControlCharacters(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: `/a b/c`, want: `"/a b/c"`},
		{in: `/a"b\c`, want: `"/a\"b\\c"`},
		{in: "/a\nb", wantErr: true},
	}
	for _, tt := range tests {
		got, err := tomlString(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("tomlString(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestDaemonEnvPutsOwnBinFirstAndDropsNotifySocket(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{
			name:    "existing PATH is kept after bin",
			environ: []string{"HOME=/root", "PATH=/usr/bin:/bin", "NOTIFY_SOCKET=/run/systemd/notify"},
			want:    []string{"HOME=/root", "PATH=/x/bin:/usr/bin:/bin"},
		},
		{
			name:    "missing PATH gets the default",
			environ: []string{"HOME=/root"},
			want:    []string{"HOME=/root", "PATH=/x/bin:" + defaultPath},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := daemonEnv(tt.environ, "/x/bin"); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLinkSelfMakesHardLinksAndReplacesStaleOnes(t *testing.T) {
	bin := t.TempDir()
	stale := filepath.Join(bin, ShimName)
	if err := os.WriteFile(stale, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second run keeps the links
		if err := linkSelf(bin); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	selfInfo, err := os.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{DaemonName, ShimName} {
		fi, err := os.Lstat(filepath.Join(bin, name))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || !os.SameFile(fi, selfInfo) {
			t.Errorf("%s is not a hard link to the executable", name)
		}
	}
}

func TestCopyFileKeepsModeAndTime(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := copyFile(self, dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(self)
	b, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !sameContent(a, b) || b.Mode().Perm()&0o111 == 0 {
		t.Errorf("copy differs: %v %v / %v %v", a.Size(), a.ModTime(), b.Size(), b.ModTime())
	}
}

func TestDispatchLeavesOtherNamesAlone(t *testing.T) {
	for _, argv0 := range []string{"skiff", "/usr/local/bin/skiff", "containerd-shim", "ctr", "/x/containerd-shim-runc-v1"} {
		if handled, code := Dispatch(argv0, []string{"agent"}); handled || code != 0 {
			t.Errorf("Dispatch(%q) = %v, %d; want not handled", argv0, handled, code)
		}
	}
}
