package admission_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"skiff/server/admission"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/store"
)

// storeGetter reads RuntimeClasses from the test server's store.
type storeGetter struct{ srv **apitest.Server }

func (g storeGetter) RuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	s := *g.srv
	res, _ := s.Registry.Lookup("node.k8s.io", "v1", "runtimeclasses")
	e, err := s.Storage.Get(ctx, res, "", name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return e.Obj.(*nodev1.RuntimeClass), nil
}

func startWithRuntimeClass(t *testing.T) kubernetes.Interface {
	t.Helper()
	var srv *apitest.Server
	srv = apitest.Start(t, apitest.Options{Admission: func(store.Store) []apiserver.Admitter {
		return []apiserver.Admitter{admission.RuntimeClass{Get: storeGetter{&srv}}}
	}})
	c := kubernetes.NewForConfigOrDie(srv.Config(nil))
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func rcPod(name, class string, edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if class != "" {
		p.Spec.RuntimeClassName = &class
	}
	if edit != nil {
		edit(p)
	}
	return p
}

func TestRuntimeClass_Admission(t *testing.T) {
	c := startWithRuntimeClass(t)
	ctx := context.Background()
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi")}
	classes := []*nodev1.RuntimeClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "runc"},
		{ObjectMeta: metav1.ObjectMeta{Name: "heavy"}, Handler: "runc", Overhead: &nodev1.Overhead{PodFixed: overhead}},
		{ObjectMeta: metav1.ObjectMeta{Name: "placed"}, Handler: "runc", Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"sandbox": "yes"},
			Tolerations:  []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
	}
	for _, rc := range classes {
		if _, err := c.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	otherOverhead := func(p *corev1.Pod) {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	}
	cases := []struct {
		name      string
		pod       *corev1.Pod
		forbidden bool
		check     func(*corev1.Pod) bool
	}{
		{"missing class", rcPod("missing", "nope", nil), true, nil},
		{"class without overhead", rcPod("plain", "plain", nil), false, func(p *corev1.Pod) bool { return p.Spec.Overhead == nil }},
		{"overhead copied", rcPod("heavy", "heavy", nil), false, func(p *corev1.Pod) bool {
			cpu, mem := p.Spec.Overhead[corev1.ResourceCPU], p.Spec.Overhead[corev1.ResourceMemory]
			return cpu.String() == "10m" && mem.String() == "1Mi"
		}},
		{"different overhead", rcPod("other", "heavy", otherOverhead), true, nil},
		{"overhead without class", rcPod("bare", "", otherOverhead), true, nil},
		{"scheduling merged", rcPod("placed", "placed", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }), false, func(p *corev1.Pod) bool {
			return p.Spec.NodeSelector["sandbox"] == "yes" && p.Spec.NodeSelector["zone"] == "a" && len(p.Spec.Tolerations) == 1 && p.Spec.Tolerations[0].Key == "sandbox"
		}},
		{"selector conflict", rcPod("conflict", "placed", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"sandbox": "no"} }), true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.CoreV1().Pods("default").Create(ctx, tc.pod, metav1.CreateOptions{})
			if tc.forbidden {
				if !apierrors.IsForbidden(err) {
					t.Fatalf("got %v, want 403 Forbidden", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(got) {
				t.Fatalf("admitted pod spec not as expected: overhead %v selector %v tolerations %v", got.Spec.Overhead, got.Spec.NodeSelector, got.Spec.Tolerations)
			}
		})
	}
	// A deleted class no longer admits pods.
	if err := c.NodeV1().RuntimeClasses().Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, rcPod("after-delete", "plain", nil), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("pod of a deleted class: %v, want 403", err)
	}
}
