//go:build !embedshim

package daemon

// embeddedShim is empty in builds without the embedshim tag (go test, a
// plain go build): the shim is then this binary, dispatched on its name.
var embeddedShim []byte
