package volumes

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDownwardAPIFiles_UnsetLimit_NodeAllocatable(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		"cpu": resource.MustParse("2"), "memory": resource.MustParse("1Gi")}}}
	items := []corev1.DownwardAPIVolumeFile{
		{Path: "cpu_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "memory_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
	}
	tests := []struct {
		name string
		vol  corev1.VolumeSource
	}{
		{name: "downwardAPI volume", vol: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}},
		{name: "projected downwardAPI", vol: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{Items: items}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t, node)
			pod := newPod(corev1.Volume{Name: "podinfo", VolumeSource: tt.vol})
			vols, err := m.Setup(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]string{"cpu_limit": "2000", "memory_limit": "1024"} {
				if got := readFile(t, filepath.Join(vols["podinfo"], p)); got != want {
					t.Fatalf("%s = %q, want %q", p, got, want)
				}
			}
		})
	}
}
