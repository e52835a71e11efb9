package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"skiff/agent/podenv"
	"skiff/runtime/containers"
)

// Mounts returns container c's bind mounts: each volumeMount (subPath
// resolved inside its volume and created as a directory when missing;
// readOnly from the mount, and always for configMap, secret, downwardAPI,
// projected and image volumes; an image volume's subPath must be an
// existing directory), then /etc/hosts, /etc/hostname and
// /etc/resolv.conf from WritePodFiles unless the container mounts
// something there itself (each only once written; read-only with a
// read-only root filesystem). A subPathExpr needs the container's
// environment: use MountsWithEnv.
func (m *Manager) Mounts(pod *corev1.Pod, c *corev1.Container, vols Volumes) ([]containers.Mount, error) {
	return m.MountsWithEnv(pod, c, vols, nil)
}

// MountsWithEnv is Mounts with the container's resolved environment
// (KEY=VALUE, from podenv.Resolve) to expand subPathExpr.
func (m *Manager) MountsWithEnv(pod *corev1.Pod, c *corev1.Container, vols Volumes, env []string) ([]containers.Mount, error) {
	var out []containers.Mount
	taken := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		host, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, ErrNotSetUp)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			var err error
			if sub, err = podenv.ExpandSubPath(vm.SubPathExpr, env); err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
			}
		}
		if sub != "" {
			resolve := subPath
			if v := podVolume(pod, vm.Name); v != nil && v.Image != nil {
				resolve = imageSubPath
			}
			var err error
			if host, err = resolve(host, sub); err != nil {
				return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
			}
		}
		out = append(out, containers.Mount{
			HostPath:      host,
			ContainerPath: vm.MountPath,
			ReadOnly:      vm.ReadOnly || readOnlyVolume(pod, vm.Name),
		})
		taken[filepath.Clean(vm.MountPath)] = true
	}
	ro := c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem
	dir := m.PodDir(string(pod.UID))
	for _, f := range []struct{ host, ctr string }{
		{filepath.Join(dir, hostsFile), "/etc/hosts"},
		{filepath.Join(dir, hostnameFile), "/etc/hostname"},
		{filepath.Join(dir, resolvFile), "/etc/resolv.conf"},
	} {
		if taken[f.ctr] {
			continue
		}
		if _, err := os.Stat(f.host); err != nil {
			continue
		}
		out = append(out, containers.Mount{HostPath: f.host, ContainerPath: f.ctr, ReadOnly: ro})
	}
	return out, nil
}

// ErrSubPath is returned (wrapped) for a subPath that is absolute, has a
// ".." element or leaves its volume through a symlink.
var ErrSubPath = errors.New("invalid subPath")

// subPath returns the resolved host path of sub inside the volume at root,
// creating it as a directory (with the volume root's mode) when missing.
func subPath(root, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("%w %q: must be relative", ErrSubPath, sub)
	}
	for _, el := range strings.Split(filepath.ToSlash(sub), "/") {
		if el == ".." {
			return "", fmt.Errorf("%w %q: must not contain '..'", ErrSubPath, sub)
		}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("volume path: %w", err)
	}
	full := filepath.Join(root, sub)
	if _, err := os.Lstat(full); errors.Is(err, os.ErrNotExist) {
		// The deepest existing ancestor must resolve inside the volume
		// before anything is created below it.
		anc := filepath.Dir(full)
		for {
			if _, err := os.Lstat(anc); err == nil {
				break
			}
			anc = filepath.Dir(anc)
		}
		if err := within(realRoot, anc, sub); err != nil {
			return "", err
		}
		info, err := os.Stat(realRoot)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(full, info.Mode().Perm()); err != nil {
			return "", fmt.Errorf("create subPath %q: %w", sub, err)
		}
		if err := os.Chmod(full, info.Mode().Perm()); err != nil {
			return "", err
		}
	}
	if err := within(realRoot, full, sub); err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(full)
}

// within checks that p resolves to realRoot or below it.
func within(realRoot, p, sub string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrSubPath, sub, err)
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return fmt.Errorf("%w %q: resolves to %s, outside the volume", ErrSubPath, sub, real)
	}
	return nil
}
