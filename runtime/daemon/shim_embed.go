//go:build embedshim

package daemon

import _ "embed"

// embeddedShim is containerd's own runc shim, built as a separate small
// binary by `make build` and carried inside skiff. Every container has a
// shim process, and a shim that is the whole skiff binary pays skiff's
// package initialisation (the client-go scheme…) at every start and keeps
// about 8 MiB private per container.
//
//go:embed shimbin/containerd-shim-runc-v2
var embeddedShim []byte
