// Package golden compares test output with files under testdata/, which
// a test run with its -update flag rewrites (to be reviewed by eye).
package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check compares got with testdata/<name>, or writes it there when update
// is set. what says what got is, for the failure message.
func Check(t testing.TB, name, what, got string, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it, then review it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run with -update after review):\n%s", path, what, LineDiff(string(want), got))
	}
}

// LineDiff lists the lines only in want (-) or only in got (+); when both
// have the same lines in another order it shows both whole.
func LineDiff(want, got string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if g[l] == 0 {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] == 0 {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order)\n--- want\n" + want + "--- got\n" + got
	}
	return b.String()
}
