// Package images imports, pulls, lists and garbage-collects container images
// in containerd, so that pods run on air-gapped machines from imported
// tarballs and pull from registries (with mirrors and credentials) otherwise.
package images

import "errors"

var (
	// ErrNotPresent is returned for imagePullPolicy Never when the image is
	// not in the store.
	ErrNotPresent = errors.New("image not present")
	// ErrPull wraps a failed pull.
	ErrPull = errors.New("image pull failed")
)

// Image is one image in the store.
type Image struct {
	// Ref is the normalized name (docker.io/library/busybox:latest).
	Ref string
	// ID is the config digest (sha256:…), as the kubelet reports imageID.
	ID   string
	Size int64
}

// Credential is a registry login from a pod's imagePullSecrets.
type Credential struct {
	Registry string
	Username string
	Password string
}
