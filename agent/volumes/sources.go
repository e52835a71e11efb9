package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/agent/podenv"
)

// setupEmptyDir makes an emptyDir: a 0777 directory, with a tmpfs (bounded
// by sizeLimit) for medium Memory; an fsGroup owns it with the setgid bit.
func setupEmptyDir(dir string, src *corev1.EmptyDirVolumeSource, gid *int64) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	switch src.Medium {
	case corev1.StorageMediumDefault:
	case corev1.StorageMediumMemory:
		var size int64
		if src.SizeLimit != nil {
			size = src.SizeLimit.Value()
		}
		if err := mountTmpfs(dir, size, 0o777); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: emptyDir medium %q", ErrUnsupported, src.Medium)
	}
	perm := os.FileMode(0o777)
	if gid != nil {
		if err := os.Chown(dir, -1, int(*gid)); err != nil {
			return err
		}
		perm |= os.ModeSetgid
	}
	return os.Chmod(dir, perm)
}

// memoryBacked puts dir on a tmpfs, as the kubelet does for secret and
// projected volumes so that their content never reaches the disk.
func memoryBacked(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return mountTmpfs(dir, 0, 0o755)
}

// checkHostPath applies the hostPath type's checks, creating the
// directory (with its parents) for DirectoryOrCreate and the file (not its
// parent) for FileOrCreate.
func checkHostPath(src *corev1.HostPathVolumeSource) error {
	p := src.Path
	var typ corev1.HostPathType
	if src.Type != nil {
		typ = *src.Type
	}
	if typ == corev1.HostPathUnset {
		return nil
	}
	info, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		switch typ {
		case corev1.HostPathDirectoryOrCreate:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: %w", err)
			}
			return nil
		case corev1.HostPathFileOrCreate:
			// As upstream, the parent directory is not created.
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return fmt.Errorf("hostPath type check failed: %w", err)
			}
			return f.Close()
		}
		return fmt.Errorf("hostPath type check failed: %s does not exist (type %s)", p, typ)
	}
	if err != nil {
		return fmt.Errorf("hostPath type check failed: %w", err)
	}
	m := info.Mode()
	var ok bool
	var what string
	switch typ {
	case corev1.HostPathDirectory, corev1.HostPathDirectoryOrCreate:
		ok, what = m.IsDir(), "a directory"
	case corev1.HostPathFile, corev1.HostPathFileOrCreate:
		ok, what = m.IsRegular(), "a file"
	case corev1.HostPathSocket:
		ok, what = m&os.ModeSocket != 0, "a socket file"
	case corev1.HostPathCharDev:
		ok, what = m&os.ModeDevice != 0 && m&os.ModeCharDevice != 0, "a character device"
	case corev1.HostPathBlockDev:
		ok, what = m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0, "a block device"
	default:
		return fmt.Errorf("hostPath type check failed: unknown type %q", typ)
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not %s", p, what)
	}
	return nil
}

func configMapProjection(s *corev1.ConfigMapVolumeSource) *corev1.ConfigMapProjection {
	return &corev1.ConfigMapProjection{LocalObjectReference: s.LocalObjectReference, Items: s.Items, Optional: s.Optional}
}

func secretProjection(s *corev1.SecretVolumeSource) *corev1.SecretProjection {
	return &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: s.SecretName}, Items: s.Items, Optional: s.Optional}
}

func isTrue(b *bool) bool { return b != nil && *b }

// configMapPayload reads a ConfigMap's Data and BinaryData into files.
func (m *Manager) configMapPayload(ctx context.Context, ns string, src *corev1.ConfigMapProjection, def os.FileMode) (payload, error) {
	cm, err := m.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, src.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			if isTrue(src.Optional) {
				return payload{}, nil
			}
			return nil, fmt.Errorf("configmap %q not found", src.Name)
		}
		return nil, fmt.Errorf("get configmap %q: %w", src.Name, err)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keysPayload("configmap", src.Name, data, src.Items, def, isTrue(src.Optional))
}

// secretPayload reads a Secret's Data into files.
func (m *Manager) secretPayload(ctx context.Context, ns string, src *corev1.SecretProjection, def os.FileMode) (payload, error) {
	s, err := m.cfg.Client.CoreV1().Secrets(ns).Get(ctx, src.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			if isTrue(src.Optional) {
				return payload{}, nil
			}
			return nil, fmt.Errorf("secret %q not found", src.Name)
		}
		return nil, fmt.Errorf("get secret %q: %w", src.Name, err)
	}
	return keysPayload("secret", src.Name, s.Data, src.Items, def, isTrue(src.Optional))
}

// keysPayload turns keys into files: all keys (file name = key) without
// items, otherwise each item's key at its path with its mode.
func keysPayload(kind, name string, data map[string][]byte, items []corev1.KeyToPath, def os.FileMode, optional bool) (payload, error) {
	p := payload{}
	if len(items) == 0 {
		for k, v := range data {
			p[k] = file{Data: v, Mode: def}
		}
		return p, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s %q references non-existent key %q", kind, name, it.Key)
		}
		if err := validatePath(it.Path); err != nil {
			return nil, fmt.Errorf("%s %q key %q: %w", kind, name, it.Key, err)
		}
		md := def
		if it.Mode != nil {
			md = os.FileMode(*it.Mode).Perm()
		}
		p[filepath.Clean(it.Path)] = file{Data: v, Mode: md}
	}
	return p, nil
}

// downwardPayload renders downwardAPI items from the pod; alloc gives the
// node's allocatable, the default of limits.* a container does not set.
func downwardPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def os.FileMode, alloc func() (corev1.ResourceList, error)) (payload, error) {
	p := payload{}
	for _, it := range items {
		if err := validatePath(it.Path); err != nil {
			return nil, err
		}
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = podenv.FieldValue(pod, it.FieldRef.FieldPath, "", "")
		case it.ResourceFieldRef != nil:
			r := it.ResourceFieldRef
			var allocatable corev1.ResourceList
			if podenv.NeedsAllocatable(pod, r.ContainerName, r.Resource) {
				allocatable, err = alloc()
			}
			if err == nil {
				val, err = podenv.ResourceValue(pod, r.ContainerName, r.Resource, r.Divisor, allocatable)
			}
		default:
			err = fmt.Errorf("item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("downwardAPI %q: %w", it.Path, err)
		}
		md := def
		if it.Mode != nil {
			md = os.FileMode(*it.Mode).Perm()
		}
		p[filepath.Clean(it.Path)] = file{Data: []byte(val), Mode: md}
	}
	return p, nil
}

// projectedPayload merges every source of a projected volume.
func (m *Manager) projectedPayload(ctx context.Context, pod *corev1.Pod, volName string, src *corev1.ProjectedVolumeSource, bundles func() ([]certificatesv1.ClusterTrustBundle, error)) (payload, error) {
	def := mode(src.DefaultMode)
	out := payload{}
	for i, s := range src.Sources {
		var p payload
		var err error
		switch {
		case s.ConfigMap != nil:
			p, err = m.configMapPayload(ctx, pod.Namespace, s.ConfigMap, def)
		case s.Secret != nil:
			p, err = m.secretPayload(ctx, pod.Namespace, s.Secret, def)
		case s.DownwardAPI != nil:
			p, err = downwardPayload(pod, s.DownwardAPI.Items, def, m.allocatable(ctx))
		case s.ServiceAccountToken != nil:
			var tok string
			tok, err = m.token(ctx, pod, fmt.Sprintf("%s/%s/%d", pod.UID, volName, i), s.ServiceAccountToken)
			if err == nil {
				if err = validatePath(s.ServiceAccountToken.Path); err == nil {
					p = payload{filepath.Clean(s.ServiceAccountToken.Path): tokenFile(pod, tok, def)}
				}
			}
		case s.ClusterTrustBundle != nil:
			p, err = trustBundlePayload(s.ClusterTrustBundle, def, bundles) // trustbundles.go
		case s.PodCertificate != nil:
			p, err = m.podCertificatePayload(ctx, pod, fmt.Sprintf("%s/%s/%d", pod.UID, volName, i), s.PodCertificate, def) // podcert.go
		default:
			err = fmt.Errorf("%w: projected source %d (only configMap, secret, downwardAPI, serviceAccountToken, clusterTrustBundle, podCertificate)", ErrUnsupported, i)
		}
		if err != nil {
			return nil, err
		}
		for k, v := range p {
			out[k] = v
		}
	}
	return out, nil
}

// tokenFile is the token's file as the kubelet writes it: with defaultMode,
// except 0600 (0640 with fsGroup) owned by the pods' user when all its
// containers run as the same user or an fsGroup is set.
func tokenFile(pod *corev1.Pod, tok string, def os.FileMode) file {
	f := file{Data: []byte(tok), Mode: def}
	f.UID = commonRunAsUser(pod)
	if f.UID != nil || fsGroup(pod) != nil {
		f.Mode = 0o600
	}
	return f
}

// commonRunAsUser is the runAsUser shared by every container of the pod
// (init containers included), or nil when they differ or one has none.
func commonRunAsUser(pod *corev1.Pod) *int64 {
	var podUser *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		podUser = sc.RunAsUser
	}
	var user *int64
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		u := podUser
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			u = c.SecurityContext.RunAsUser
		}
		if u == nil || (user != nil && *user != *u) {
			return nil
		}
		user = u
	}
	return user
}

// setupClaim returns the host path of a PersistentVolumeClaim: the path of
// a bound hostPath or local PersistentVolume, otherwise a directory of its
// own under PVCRoot named after the claim's UID (kept across pods).
func (m *Manager) setupClaim(ctx context.Context, ns, claim string) (string, error) {
	pvc, err := m.cfg.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("persistentvolumeclaim %q not found", claim)
		}
		return "", fmt.Errorf("get persistentvolumeclaim %q: %w", claim, err)
	}
	if pvName := pvc.Spec.VolumeName; pvName != "" {
		pv, err := m.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("get persistentvolume %q of claim %q: %w", pvName, claim, err)
		}
		switch {
		case pv.Spec.HostPath != nil:
			hp := *pv.Spec.HostPath
			if hp.Type == nil {
				t := corev1.HostPathDirectoryOrCreate
				hp.Type = &t
			}
			return hp.Path, checkHostPath(&hp)
		case pv.Spec.Local != nil:
			d := corev1.HostPathDirectory
			return pv.Spec.Local.Path, checkHostPath(&corev1.HostPathVolumeSource{Path: pv.Spec.Local.Path, Type: &d})
		}
	}
	dir := filepath.Join(m.cfg.PVCRoot, string(pvc.UID))
	if pvc.UID == "" {
		dir = filepath.Join(m.cfg.PVCRoot, ns+"_"+claim)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("claim %q: %w", claim, err)
	}
	return dir, os.Chmod(dir, 0o777)
}
