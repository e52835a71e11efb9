package kubelet

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// ImageVolumeMounter is optional on Volumes: it mounts a pod's image volume
// (KEP-4639) from an image already present on the node and returns its host
// path (agent/volumes.Manager.MountImage). Without it, containers that
// mount an image volume do not start.
type ImageVolumeMounter interface {
	MountImage(ctx context.Context, pod *corev1.Pod, volume, ref string) (string, error)
}

// ensureImageVolumes pulls and mounts the image volumes container c mounts,
// before c is created, as upstream's kubelet does: each image is pulled
// with its volume's pullPolicy through the container images' pull path
// (registries, mirrors, the pod's pull secrets, back-off, events), so a
// failed pull leaves c waiting with ErrImagePull or ImagePullBackOff.
func (w *podWorker) ensureImageVolumes(ctx context.Context, pod *corev1.Pod, c *corev1.Container) error {
	k := w.k
	for _, vm := range c.VolumeMounts {
		v := volumeNamed(pod, vm.Name)
		if v == nil || v.Image == nil {
			continue
		}
		src := v.Image
		img, err := w.pullImage(ctx, pod, "pull/"+string(pod.UID)+"/volume/"+v.Name, src.Reference, defaultPullPolicy(src.PullPolicy, src.Reference))
		if err != nil {
			return err
		}
		m, ok := k.cfg.Volumes.(ImageVolumeMounter)
		if !ok {
			return &pullError{reason: reasonCreateContainerConfig, message: fmt.Sprintf("image volume %q: image volumes are not supported on this node", v.Name)}
		}
		ref := img.Ref
		if ref == "" {
			ref = src.Reference
		}
		path, err := m.MountImage(ctx, pod, v.Name, ref)
		if err != nil {
			k.event(pod, corev1.EventTypeWarning, "Failed", "Error: failed to mount image volume: %v", err)
			return &pullError{reason: reasonCreateContainer, message: fmt.Sprintf("failed to mount image volume %q: %v", v.Name, err), err: err}
		}
		w.setField(func() {
			vols := maps.Clone(w.vols)
			if vols == nil {
				vols = map[string]string{}
			}
			vols[v.Name] = path
			w.vols = vols
			if w.imageVolumeIDs == nil {
				w.imageVolumeIDs = map[string]string{}
			}
			w.imageVolumeIDs[v.Name] = img.ID
		})
	}
	return nil
}

func volumeNamed(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}
