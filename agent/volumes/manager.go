// Package volumes makes a pod's volumes on the node as the kubelet does:
// emptyDir (tmpfs for medium Memory), hostPath with type checks, configMap,
// secret, downwardAPI and projected volumes (service-account tokens
// included) written atomically (secret and projected ones on a tmpfs), persistentVolumeClaims on local paths,
// image volumes as read-only views of an image's root filesystem; the
// containers' bind mounts with subPath; and the pod's /etc/hosts,
// /etc/hostname and /etc/resolv.conf.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Plugin directory names under <Root>/<uid>/volumes, as the kubelet's.
const (
	pluginEmptyDir  = "kubernetes.io~empty-dir"
	pluginConfigMap = "kubernetes.io~configmap"
	pluginSecret    = "kubernetes.io~secret"
	pluginDownward  = "kubernetes.io~downward-api"
	pluginProjected = "kubernetes.io~projected"
)

// ErrUnsupported is returned (wrapped) for a volume type skiff does not
// provide.
var ErrUnsupported = errors.New("unsupported volume type")

// ErrNotSetUp is returned (wrapped) by Mounts for a volumeMount whose
// volume is not in the Volumes given.
var ErrNotSetUp = errors.New("volume not set up")

// Config configures a Manager.
type Config struct {
	// Root is <data-dir>/agent/pods: one directory per pod UID.
	Root string
	// Client reads ConfigMaps, Secrets, PVCs/PVs and requests
	// service-account tokens.
	Client   kubernetes.Interface
	NodeName string
	// ClusterDomain is the DNS domain ("cluster.local" when empty).
	ClusterDomain string
	Logger        *slog.Logger
	// PVCRoot holds the directories of claims not bound to a hostPath or
	// local PersistentVolume (<Root>/../pvc when empty).
	PVCRoot string
	// HostsFile is the node's hosts file, given to hostNetwork pods
	// (/etc/hosts when empty).
	HostsFile string
	// Now is the clock (time.Now when nil); tests inject one to drive
	// token refresh.
	Now func() time.Time
	// PodCertificates issues podCertificate projections (none when nil:
	// pods using them do not start).
	PodCertificates PodCertificates
	// Images mounts image volumes (none when nil: MountImage fails with
	// ErrUnsupported and such pods do not start).
	Images ImageViews
}

// Manager sets up and tears down pod volumes. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	podLocks map[string]*sync.Mutex
	tokens   map[string]tokenEntry
}

// Volumes maps a pod's volume name to its path on the host.
type Volumes map[string]string

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PVCRoot == "" {
		cfg.PVCRoot = filepath.Join(filepath.Dir(filepath.Clean(cfg.Root)), "pvc")
	}
	if cfg.HostsFile == "" {
		cfg.HostsFile = "/etc/hosts"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{cfg: cfg, log: cfg.Logger, podLocks: map[string]*sync.Mutex{}, tokens: map[string]tokenEntry{}}
}

// PodDir is the pod's directory, <Root>/<uid>.
func (m *Manager) PodDir(uid string) string { return filepath.Join(m.cfg.Root, uid) }

func (m *Manager) volumeDir(uid, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", plugin, name)
}

func (m *Manager) lockPod(uid string) func() {
	m.mu.Lock()
	l, ok := m.podLocks[uid]
	if !ok {
		l = &sync.Mutex{}
		m.podLocks[uid] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Setup makes every volume of pod on disk and returns their host paths.
// It is idempotent: running it again refreshes configMap, secret,
// downwardAPI and projected volumes (renewing service-account tokens that
// are near expiry) atomically. Every volume is attempted; the error joins
// one "MountVolume.SetUp failed for volume "<name>" : <why>" per failed
// volume (the kubelet's FailedMount message) and the Volumes returned hold
// the volumes that succeeded, plus those whose refresh failed but whose
// earlier content is still on disk (running containers keep using it).
func (m *Manager) Setup(ctx context.Context, pod *corev1.Pod) (Volumes, error) {
	uid := string(pod.UID)
	if uid == "" {
		return nil, errors.New("pod has no UID")
	}
	defer m.lockPod(uid)()
	if err := os.MkdirAll(filepath.Join(m.PodDir(uid), "volumes"), 0o750); err != nil {
		return nil, fmt.Errorf("create pod directory: %w", err)
	}
	vols := Volumes{}
	var errs []error
	bundles := m.trustBundles(ctx) // trustbundles.go: one list for all volumes
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := ctx.Err(); err != nil {
			return vols, err
		}
		if v.Image != nil {
			// Mounted by MountImage once the kubelet has pulled the
			// image (image.go); listed here only when mounted.
			if path, ok := m.mountedImage(uid, v.Name); ok {
				vols[v.Name] = path
			}
			continue
		}
		path, err := m.setupVolume(ctx, pod, v, bundles)
		if err != nil {
			errs = append(errs, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err))
			if !written(path) {
				continue
			}
		}
		vols[v.Name] = path
	}
	return vols, errors.Join(errs...)
}

func (m *Manager) setupVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume, bundles func() ([]certificatesv1.ClusterTrustBundle, error)) (string, error) {
	uid := string(pod.UID)
	src := v.VolumeSource
	switch {
	case src.EmptyDir != nil:
		dir := m.volumeDir(uid, pluginEmptyDir, v.Name)
		return dir, setupEmptyDir(dir, src.EmptyDir, fsGroup(pod))
	case src.HostPath != nil:
		return src.HostPath.Path, checkHostPath(src.HostPath)
	case src.ConfigMap != nil:
		dir := m.volumeDir(uid, pluginConfigMap, v.Name)
		p, err := m.configMapPayload(ctx, pod.Namespace, configMapProjection(src.ConfigMap), mode(src.ConfigMap.DefaultMode))
		return dir, m.write(dir, p, err, pod)
	case src.Secret != nil:
		dir := m.volumeDir(uid, pluginSecret, v.Name)
		if err := memoryBacked(dir); err != nil {
			return dir, err
		}
		p, err := m.secretPayload(ctx, pod.Namespace, secretProjection(src.Secret), mode(src.Secret.DefaultMode))
		return dir, m.write(dir, p, err, pod)
	case src.DownwardAPI != nil:
		dir := m.volumeDir(uid, pluginDownward, v.Name)
		p, err := downwardPayload(pod, src.DownwardAPI.Items, mode(src.DownwardAPI.DefaultMode), m.allocatable(ctx))
		return dir, m.write(dir, p, err, pod)
	case src.Projected != nil:
		dir := m.volumeDir(uid, pluginProjected, v.Name)
		if err := memoryBacked(dir); err != nil {
			return dir, err
		}
		p, err := m.projectedPayload(ctx, pod, v.Name, src.Projected, bundles)
		return dir, m.write(dir, p, err, pod)
	case src.PersistentVolumeClaim != nil:
		return m.setupClaim(ctx, pod.Namespace, src.PersistentVolumeClaim.ClaimName)
	case src.Ephemeral != nil:
		return m.setupClaim(ctx, pod.Namespace, pod.Name+"-"+v.Name)
	}
	return "", fmt.Errorf("%w (only emptyDir, hostPath, configMap, secret, downwardAPI, projected, persistentVolumeClaim and ephemeral)", ErrUnsupported)
}

// written reports whether an atomically written volume already has content.
func written(dir string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Lstat(filepath.Join(dir, dataLink))
	return err == nil
}

func (m *Manager) write(dir string, p payload, err error, pod *corev1.Pod) error {
	if err != nil {
		return err
	}
	return writeAtomic(dir, p, m.cfg.Now(), fsGroup(pod))
}

func fsGroup(pod *corev1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// mode is a volume's defaultMode, 0644 when unset.
func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m).Perm()
}

// readOnlyVolume reports whether the named volume is always mounted
// read-only: configMap, secret, downwardAPI and projected volumes (as the
// kubelet does), image volumes, and persistentVolumeClaim sources marked
// readOnly.
func readOnlyVolume(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		s := v.VolumeSource
		switch {
		case s.ConfigMap != nil, s.Secret != nil, s.DownwardAPI != nil, s.Projected != nil, s.Image != nil:
			return true
		case s.PersistentVolumeClaim != nil:
			return s.PersistentVolumeClaim.ReadOnly
		}
	}
	return false
}

// Teardown removes the views of the pod's image volumes, unmounts every
// tmpfs under the pod's directory and removes it, and forgets the pod's
// tokens. It is idempotent.
func (m *Manager) Teardown(ctx context.Context, podUID string) error {
	if podUID == "" || strings.ContainsAny(podUID, "/") || podUID == "." || podUID == ".." {
		return fmt.Errorf("invalid pod UID %q", podUID)
	}
	defer m.lockPod(podUID)()
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := m.PodDir(podUID)
	if err := m.removeImageViews(ctx, podUID); err != nil {
		return fmt.Errorf("teardown pod %s: %w", podUID, err)
	}
	if err := unmountAll(dir); err != nil {
		return fmt.Errorf("teardown pod %s: %w", podUID, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("teardown pod %s: %w", podUID, err)
	}
	m.mu.Lock()
	for k := range m.tokens {
		if strings.HasPrefix(k, podUID+"/") {
			delete(m.tokens, k)
		}
	}
	delete(m.podLocks, podUID)
	m.mu.Unlock()
	if m.cfg.PodCertificates != nil {
		m.cfg.PodCertificates.Forget(podUID)
	}
	return nil
}

// PodUIDsOnDisk lists the pod UIDs that have a directory under Root, sorted.
func (m *Manager) PodUIDsOnDisk() ([]string, error) {
	entries, err := os.ReadDir(m.cfg.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
