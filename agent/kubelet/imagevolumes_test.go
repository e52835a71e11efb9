package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/containers"
)

// imageVolumes is fakeVolumes that mounts image volumes and binds every
// volumeMount from the volumes it was given (read-only for image ones).
type imageVolumes struct {
	*fakeVolumes
	mu      sync.Mutex
	mounted map[string]string // volume → image ref
	fail    error
}

func (v *imageVolumes) MountImage(_ context.Context, pod *corev1.Pod, volume, ref string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.fail != nil {
		return "", v.fail
	}
	v.mounted[volume] = ref
	return "/pods/" + string(pod.UID) + "/image/" + volume, nil
}

func (v *imageVolumes) Mounts(pod *corev1.Pod, c *corev1.Container, vols map[string]string) ([]containers.Mount, error) {
	var out []containers.Mount
	for _, vm := range c.VolumeMounts {
		host, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q not set up", vm.Name)
		}
		out = append(out, containers.Mount{HostPath: host, ContainerPath: vm.MountPath, ReadOnly: true})
	}
	return out, nil
}

func imageVolumePod(name, ref string, policy corev1.PullPolicy) *corev1.Pod {
	pod := testPod(name, corev1.RestartPolicyAlways, "app")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/volume"}}
	return pod
}

func waitingReason(h *harness, pod string) string {
	cs := h.cstatus(pod, "app")
	if cs == nil || cs.State.Waiting == nil {
		return ""
	}
	return cs.State.Waiting.Reason
}

func TestImageVolume_ImagePresent_MountedIntoTheContainerAndKeptFromGC(t *testing.T) {
	h := newHarness(t)
	iv := &imageVolumes{fakeVolumes: h.vol, mounted: map[string]string{}}
	h.cfg.Volumes = iv
	h.start()
	h.create(imageVolumePod("iv", "kitten:1.7", corev1.PullIfNotPresent))
	c := h.running("iv", "app", 0)
	h.rt.mu.Lock()
	cfg := h.rt.cfgs[c.ID]
	h.rt.mu.Unlock()
	want := containers.Mount{HostPath: "/pods/uid-iv/image/data", ContainerPath: "/volume", ReadOnly: true}
	if len(cfg.Mounts) != 1 || cfg.Mounts[0] != want {
		t.Fatalf("container mounts %+v, want [%+v]", cfg.Mounts, want)
	}
	iv.mu.Lock()
	ref := iv.mounted["data"]
	iv.mu.Unlock()
	if ref != "docker.io/library/kitten:1.7" {
		t.Fatalf("mounted image %q, want the pulled image's ref", ref)
	}
	if !h.k.ImagesInUse()["sha256:kitten:1.7"] {
		t.Fatalf("ImagesInUse %v lacks the image volume's image", h.k.ImagesInUse())
	}
}

func TestImageVolume_PullFailsOrNeverAbsent_ContainerWaitsWithPullReason(t *testing.T) {
	tests := []struct {
		name, ref  string
		policy     corev1.PullPolicy
		wantReason []string
	}{
		{"pull fails", "broken:1", corev1.PullAlways, []string{"ErrImagePull", "ImagePullBackOff"}},
		{"never and absent", "local:1", corev1.PullNever, []string{"ErrImageNeverPull"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.img.absent["local:1"] = true
			h.img.setFailing("broken:1", errors.New("connection refused"))
			iv := &imageVolumes{fakeVolumes: h.vol, mounted: map[string]string{}}
			h.cfg.Volumes = iv
			h.start()
			h.create(imageVolumePod("iv", tt.ref, tt.policy))
			h.waitFor("pull reason", func() bool {
				r := waitingReason(h, "iv")
				return r == tt.wantReason[0] || (len(tt.wantReason) > 1 && r == tt.wantReason[1])
			})
			if n := h.rt.count(); n != 0 {
				t.Fatalf("%d containers created, want none before the image volume's image is there", n)
			}
			iv.mu.Lock()
			defer iv.mu.Unlock()
			if len(iv.mounted) != 0 {
				t.Fatalf("mounted %v, want nothing", iv.mounted)
			}
		})
	}
}

func TestImageVolume_MountFailsOrUnsupported_ContainerNotStarted(t *testing.T) {
	tests := []struct {
		name       string
		volumes    func(h *harness) Volumes
		wantReason string
	}{
		{"mount fails", func(h *harness) Volumes {
			return &imageVolumes{fakeVolumes: h.vol, mounted: map[string]string{}, fail: errors.New("no snapshotter")}
		}, reasonCreateContainer},
		{"no image volume support", func(h *harness) Volumes { return h.vol }, reasonCreateContainerConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.cfg.Volumes = tt.volumes(h)
			h.start()
			h.create(imageVolumePod("iv", "kitten:1.7", corev1.PullIfNotPresent))
			h.waitFor(tt.wantReason, func() bool { return waitingReason(h, "iv") == tt.wantReason })
			if n := h.rt.count(); n != 0 {
				t.Fatalf("%d containers created, want none without the image volume", n)
			}
		})
	}
}
