package volumes

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// clock is an injectable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestManager(t *testing.T, objs ...runtime.Object) (*Manager, *fake.Clientset, *clock) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "pods")
	cs := fake.NewClientset(objs...)
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m := New(Config{Root: root, Client: cs, NodeName: "node-a", Now: clk.Now})
	t.Cleanup(func() {
		// Never leave a tmpfs behind, whatever the test did.
		_ = unmountAll(root)
	})
	return m, cs, clk
}

func newPod(vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: "uid-1",
			Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "sa1", Volumes: vols,
			Containers: []corev1.Container{{Name: "main"}}},
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readLink(t *testing.T, path string) string {
	t.Helper()
	s, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }
func bp(v bool) *bool    { return &v }
