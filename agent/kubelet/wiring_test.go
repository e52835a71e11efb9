package kubelet

import (
	"skiff/runtime/containers"
	"skiff/runtime/images"
	"skiff/runtime/podnet"
)

// The agent passes the real runtime parts straight in (agent/volumes goes
// through the agent's small adapter).
var (
	_ Runtime = (*containers.Runtime)(nil)
	_ Network = (*podnet.Network)(nil)
	_ Images  = (*images.Store)(nil)
)
