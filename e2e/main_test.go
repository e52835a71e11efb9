// Package e2e drives the built skiff binary as a user would: real processes,
// real ports, real files. Set SKIFF_BIN to test a prebuilt binary (make test
// does); otherwise the binary is built from this checkout.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// skiffBin is the binary under test, set once by TestMain.
var skiffBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("SKIFF_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		skiffBin = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "skiff-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	skiffBin = filepath.Join(dir, "skiff")
	build := exec.Command("go", "build", "-o", skiffBin, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build skiff:", err)
		return 2
	}
	return m.Run()
}
