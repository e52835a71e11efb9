package mountinfo

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnescape_DecodesOctalEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`/plain/path`, "/plain/path"},
		{`/with\040space`, "/with space"},
		{`/tab\011and\134backslash`, "/tab\tand\\backslash"},
		{`/trailing\04`, `/trailing\04`},
	} {
		if got := Unescape(c.in); got != c.want {
			t.Errorf("Unescape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestUnder_ListsNestedMountsDeepestFirst_IsMountPointSeesThem(t *testing.T) {
	root := t.TempDir()
	outer := filepath.Join(root, "a dir")
	inner := filepath.Join(outer, "inner")
	for _, d := range []string{outer} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", outer, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(outer, unix.MNT_DETACH) })
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", inner, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(inner, unix.MNT_DETACH) })

	got, err := Under(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != inner || got[1] != outer {
		t.Fatalf("Under(%s) = %q, want [%s %s]", root, got, inner, outer)
	}
	for dir, want := range map[string]bool{outer: true, inner: true, root: false} {
		if ok, err := IsMountPoint(dir); err != nil || ok != want {
			t.Errorf("IsMountPoint(%s) = %v, %v; want %v", dir, ok, err, want)
		}
	}
}
