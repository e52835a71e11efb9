package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxSocketPath is the longest unix socket path the kernel accepts
// (sun_path is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// maxShimSocketDir is containerd's limit on the shim socket directory on
// Linux (core/runtime/v2 maxSocketDirLen); longer directories fall back to
// containerd's default (/run/containerd/s), which is safe to share because
// shim socket names hash the daemon address.
const maxShimSocketDir = 42

// ErrSocketPathTooLong is returned by Start when the sockets under
// Config.Dir would exceed the unix socket path limit.
var ErrSocketPathTooLong = errors.New("containerd socket path too long")

// disabledPlugins are the daemon plugins skiff never uses. The CRI plugins
// only exist in builds without the no_cri tag; the shim's own task plugin is
// linked into the same binary and must not load inside the daemon.
var disabledPlugins = []string{
	"io.containerd.grpc.v1.cri",
	"io.containerd.cri.v1.images",
	"io.containerd.cri.v1.runtime",
	"io.containerd.podsandbox.controller.v1.podsandbox",
	"io.containerd.ttrpc.v1.task",
}

// paths are the files and directories of one embedded daemon under Dir.
type paths struct {
	dir, bin, root, state, opt, config, log, address, ttrpc, shimSockets string
}

func newPaths(dir string) (paths, error) {
	if dir == "" {
		return paths{}, errors.New("daemon: Config.Dir is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return paths{}, fmt.Errorf("daemon: %w", err)
	}
	p := paths{
		dir:         abs,
		bin:         filepath.Join(abs, "bin"),
		root:        filepath.Join(abs, "root"),
		state:       filepath.Join(abs, "state"),
		opt:         filepath.Join(abs, "opt"),
		config:      filepath.Join(abs, "config.toml"),
		log:         filepath.Join(abs, "containerd.log"),
		address:     filepath.Join(abs, "containerd.sock"),
		ttrpc:       filepath.Join(abs, "containerd.sock.ttrpc"),
		shimSockets: filepath.Join(abs, "s"),
	}
	if len(p.ttrpc) > maxSocketPath {
		return paths{}, fmt.Errorf("daemon: %w: %s is %d bytes, the limit is %d: use a shorter data dir",
			ErrSocketPathTooLong, p.ttrpc, len(p.ttrpc), maxSocketPath)
	}
	if len(p.shimSockets) > maxShimSocketDir {
		p.shimSockets = ""
	}
	return p, nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			return "", fmt.Errorf("daemon: control character in path %q", s)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// configTOML renders the daemon configuration (config version 4, the
// current one of containerd 2.4; version 3 files are migrated with a
// warning at every start).
func configTOML(p paths) (string, error) {
	q := map[string]string{}
	for k, v := range map[string]string{
		"root": p.root, "state": p.state, "opt": p.opt, "address": p.address,
		"ttrpc": p.ttrpc, "sockets": p.shimSockets,
	} {
		s, err := tomlString(v)
		if err != nil {
			return "", err
		}
		q[k] = s
	}
	disabled := make([]string, len(disabledPlugins))
	for i, d := range disabledPlugins {
		disabled[i] = fmt.Sprintf("%q", d)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by skiff at every start; edits are overwritten.\nversion = 4\n")
	fmt.Fprintf(&b, "root = %s\nstate = %s\n", q["root"], q["state"])
	fmt.Fprintf(&b, "disabled_plugins = [%s]\n\n", strings.Join(disabled, ", "))
	fmt.Fprintf(&b, "[plugins.\"io.containerd.server.v1.grpc\"]\n  address = %s\n\n", q["address"])
	fmt.Fprintf(&b, "[plugins.\"io.containerd.server.v1.ttrpc\"]\n  address = %s\n\n", q["ttrpc"])
	fmt.Fprintf(&b, "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %s\n\n", q["opt"])
	fmt.Fprintf(&b, "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true\n\n")
	if p.shimSockets != "" {
		fmt.Fprintf(&b, "[plugins.\"io.containerd.shim.v1.manager\"]\n  socket_dir = %s\n", q["sockets"])
	}
	return b.String(), nil
}

// writeConfig writes config.toml atomically.
func writeConfig(p paths) error {
	text, err := configTOML(p)
	if err != nil {
		return err
	}
	tmp := p.config + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return fmt.Errorf("daemon: write config: %w", err)
	}
	if err := os.Rename(tmp, p.config); err != nil {
		return fmt.Errorf("daemon: write config: %w", err)
	}
	return nil
}
