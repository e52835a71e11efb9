//go:build linux

// Command shsel is /bin/sh of the conformance harness's busybox image substitute (images.sh).
//
// The image is built from Debian's busybox 1.35, whose ash drops environment variables whose
// names are not shell identifiers (data-1=..., "1-data-1=..."), which upstream's busybox 1.37
// keeps and the env-from [Conformance] tests print with `sh -c env`. Bash keeps them, but other
// [Conformance] tests expect ash's exact messages ("/bin/sh: can't create /file: Read-only file
// system"). So shsel picks per invocation: bash when the environment holds such a name, ash
// otherwise. It replaces itself with syscall.Exec, keeping argv (argv[0] as given, so busybox
// selects its `sh` applet by the basename and both shells prefix messages with it) and the
// environment unchanged.
package main

import (
	"fmt"
	"os"
	"syscall"
)

const (
	// ash is the busybox binary; it runs the applet named by argv[0]'s basename (sh).
	ash = "/bin/busybox"
	// bash is Debian's bash copied into the image; started as sh it runs in POSIX mode.
	bash = "/usr/bin/bash"
)

func main() {
	argv := os.Args
	if len(argv) == 0 {
		// execve with an empty argv: busybox would not know which applet to run
		argv = []string{"sh"}
	}
	// os.Environ is the process environment as received (Go drops only repeated names, which
	// kubelet never passes)
	env := os.Environ()
	shell := shellFor(env)
	err := syscall.Exec(shell, argv, env)
	fmt.Fprintf(os.Stderr, "%s: exec %s: %v\n", argv[0], shell, err)
	os.Exit(127)
}

// shellFor returns the shell to run for environment env: bash when some variable's name is not a
// shell identifier (ash would drop it), busybox ash otherwise.
func shellFor(env []string) string {
	for _, kv := range env {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if !isIdentifier(name) {
			return bash
		}
	}
	return ash
}

// isIdentifier reports whether name matches [A-Za-z_][A-Za-z0-9_]*, the POSIX shell name rule.
func isIdentifier(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
