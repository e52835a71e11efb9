package volumes

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/runtime/containers"
)

func TestMounts(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns1"}, Data: map[string]string{"app.conf": "C"}}
	outside := t.TempDir()
	tests := []struct {
		name     string
		mounts   []corev1.VolumeMount
		podFiles bool
		roRoot   bool
		want     func(vols Volumes, podDir string) []containers.Mount
		wantErr  string
	}{
		{name: "plain and readOnly mounts; configMap always read-only",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/ro", ReadOnly: true}, {Name: "cfg", MountPath: "/etc/app"}},
			want: func(v Volumes, _ string) []containers.Mount {
				return []containers.Mount{{HostPath: v["data"], ContainerPath: "/data"}, {HostPath: v["data"], ContainerPath: "/ro", ReadOnly: true},
					{HostPath: v["cfg"], ContainerPath: "/etc/app", ReadOnly: true}}
			}},
		{name: "subPath directory is created",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/logs", SubPath: "a/logs"}},
			want: func(v Volumes, _ string) []containers.Mount {
				return []containers.Mount{{HostPath: filepath.Join(v["data"], "a/logs"), ContainerPath: "/logs"}}
			}},
		{name: "subPath of a configMap key resolves to the current file",
			mounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app.conf", SubPath: "app.conf"}},
			want: func(v Volumes, _ string) []containers.Mount {
				real, _ := filepath.EvalSymlinks(filepath.Join(v["cfg"], "app.conf"))
				return []containers.Mount{{HostPath: real, ContainerPath: "/etc/app.conf", ReadOnly: true}}
			}},
		{name: "subPath with .. is refused", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "a/../../etc"}},
			wantErr: "must not contain '..'"},
		{name: "absolute subPath is refused", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "/etc"}},
			wantErr: "must be relative"},
		{name: "subPath through a symlink out of the volume is refused", mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "escape/new"}},
			wantErr: "outside the volume"},
		{name: "unknown volume", mounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}, wantErr: "volume not set up"},
		{name: "pod files are mounted once written",
			mounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}, podFiles: true,
			want: func(v Volumes, d string) []containers.Mount {
				return []containers.Mount{{HostPath: v["data"], ContainerPath: "/data"},
					{HostPath: filepath.Join(d, "etc-hosts"), ContainerPath: "/etc/hosts"},
					{HostPath: filepath.Join(d, "etc-hostname"), ContainerPath: "/etc/hostname"},
					{HostPath: filepath.Join(d, "etc-resolv.conf"), ContainerPath: "/etc/resolv.conf"}}
			}},
		{name: "own /etc/hosts mount wins; read-only root makes pod files read-only",
			mounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/hosts", SubPath: "app.conf"}}, podFiles: true, roRoot: true,
			want: func(v Volumes, d string) []containers.Mount {
				real, _ := filepath.EvalSymlinks(filepath.Join(v["cfg"], "app.conf"))
				return []containers.Mount{{HostPath: real, ContainerPath: "/etc/hosts", ReadOnly: true},
					{HostPath: filepath.Join(d, "etc-hostname"), ContainerPath: "/etc/hostname", ReadOnly: true},
					{HostPath: filepath.Join(d, "etc-resolv.conf"), ContainerPath: "/etc/resolv.conf", ReadOnly: true}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t, cm)
			pod := newPod(
				corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				cmVolume("cfg", "cfg", nil, nil))
			vols, err := m.Setup(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(vols["data"], "escape")); err != nil {
				t.Fatal(err)
			}
			if tt.podFiles {
				if err := m.WritePodFiles(pod, "10.42.0.7", DNSConfig{ClusterDNS: []string{"10.43.0.10"}}); err != nil {
					t.Fatal(err)
				}
			}
			c := &pod.Spec.Containers[0]
			c.VolumeMounts = tt.mounts
			if tt.roRoot {
				c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: bp(true)}
			}
			got, err := m.Mounts(pod, c, vols)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if entries, _ := os.ReadDir(outside); len(entries) != 0 {
					t.Fatal("something was created outside the volume")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want(vols, m.PodDir("uid-1"))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
			for _, mt := range got {
				if _, err := os.Stat(mt.HostPath); err != nil {
					t.Fatalf("mount source missing: %v", err)
				}
			}
		})
	}
}

func TestMountsSubPathExpr(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := newPod(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/logs", SubPathExpr: "logs/$(POD_NAME)"}}
	got, err := m.MountsWithEnv(pod, c, vols, []string{"POD_NAME=web-0"})
	if err != nil || len(got) != 1 || got[0].HostPath != filepath.Join(vols["data"], "logs/web-0") {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := m.Mounts(pod, c, vols); err == nil || !strings.Contains(err.Error(), "missing value for POD_NAME") {
		t.Fatalf("without env: %v", err)
	}
}

func TestSubPathSentinel(t *testing.T) {
	if _, err := subPath(t.TempDir(), "../x"); !errors.Is(err, ErrSubPath) {
		t.Fatalf("err = %v", err)
	}
}
