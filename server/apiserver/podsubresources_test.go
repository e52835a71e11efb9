package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/typed/core/v1"
)

func runningPod(t *testing.T, pods v1.PodInterface, name string, res corev1.ResourceRequirements) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 100},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "c", Image: "busybox", Resources: res},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "c", Image: "busybox", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		Resources: res.DeepCopy(),
	}}}
	p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPodGeneration_CountsSpecChangesOnly(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	p := runningPod(t, pods, "gen", corev1.ResourceRequirements{})
	if p.Generation != 1 {
		t.Fatalf("new pod generation %d (client sent 100), want 1", p.Generation)
	}
	steps := []struct {
		name string
		edit func(*corev1.Pod)
		want int64
	}{
		{"empty update", func(*corev1.Pod) {}, 1},
		{"annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{"k": "v"} }, 1},
		{"client-set generation", func(p *corev1.Pod) { p.Generation = 7 }, 1},
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx" }, 2},
		{"activeDeadlineSeconds", func(p *corev1.Pod) { d := int64(50); p.Spec.ActiveDeadlineSeconds = &d }, 3},
	}
	for _, s := range steps {
		cur, err := pods.Get(ctx, "gen", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.edit(cur)
		got, err := pods.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got.Generation != s.want {
			t.Fatalf("%s: generation %d, want %d", s.name, got.Generation, s.want)
		}
	}
	// A status write is not a spec change.
	cur, _ := pods.Get(ctx, "gen", metav1.GetOptions{})
	cur.Status.ObservedGeneration = 3
	if got, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil || got.Generation != 3 {
		t.Fatalf("status write: %v, generation %d, want 3", err, got.Generation)
	}
	// The graceful delete that sets deletionTimestamp is a new generation.
	grace := int64(60)
	if err := pods.Delete(ctx, "gen", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "gen", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil || got.Generation != 4 {
		t.Fatalf("after graceful delete: %v, generation %d, want 4 with a deletionTimestamp", err, got.Generation)
	}
}

func ephemeral(name, target string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{TargetContainerName: target, EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "busybox", TTY: true, Stdin: true}}
}

func addEphemeralPatch(t *testing.T, p *corev1.Pod, ec corev1.EphemeralContainer) []byte {
	t.Helper()
	before, _ := json.Marshal(p)
	after := p.DeepCopy()
	after.Spec.EphemeralContainers = append(after.Spec.EphemeralContainers, ec)
	afterJS, _ := json.Marshal(after)
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, afterJS, p)
	if err != nil {
		t.Fatal(err)
	}
	return patch
}

func TestEphemeralContainers_Subresource_AddsOnlyDebugContainers(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	p := runningPod(t, pods, "dbg", corev1.ResourceRequirements{})

	// The main resource refuses them.
	withEC := p.DeepCopy()
	withEC.Spec.EphemeralContainers = []corev1.EphemeralContainer{ephemeral("debugger", "")}
	if _, err := pods.Update(ctx, withEC, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("main resource update with ephemeral containers: %v, want 422", err)
	}

	got, err := pods.Patch(ctx, "dbg", types.StrategicMergePatchType, addEphemeralPatch(t, p, ephemeral("debugger", "c")), metav1.PatchOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatalf("patch ephemeralcontainers: %v", err)
	}
	if len(got.Spec.EphemeralContainers) != 1 || got.Generation != 2 {
		t.Fatalf("after patch: %d ephemeral containers, generation %d; want 1 and 2", len(got.Spec.EphemeralContainers), got.Generation)
	}
	ec := got.Spec.EphemeralContainers[0]
	if ec.TerminationMessagePolicy != corev1.TerminationMessageReadFile || ec.ImagePullPolicy == "" {
		t.Fatalf("ephemeral container not defaulted: %+v", ec)
	}
	if got.Status.Phase != corev1.PodRunning {
		t.Fatalf("status lost through the subresource: %+v", got.Status)
	}

	// Other spec changes sent through the subresource are dropped.
	upd := got.DeepCopy()
	upd.Spec.Containers[0].Image = "nginx"
	upd.Spec.EphemeralContainers = append(upd.Spec.EphemeralContainers, ephemeral("debugger2", ""))
	got, err = pods.UpdateEphemeralContainers(ctx, "dbg", upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update ephemeralcontainers: %v", err)
	}
	if len(got.Spec.EphemeralContainers) != 2 || got.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("after update: %d ephemeral containers, image %s; want 2 and busybox", len(got.Spec.EphemeralContainers), got.Spec.Containers[0].Image)
	}

	// GET through the subresource returns the pod.
	code, body := h.do(t, http.MethodGet, "/api/v1/namespaces/default/pods/dbg/ephemeralcontainers", "", "")
	if code != http.StatusOK || !strings.Contains(body, `"debugger2"`) {
		t.Fatalf("get ephemeralcontainers: %d %s", code, body)
	}
}

func TestEphemeralContainers_Subresource_RefusesInvalidChanges(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	runningPod(t, pods, "dbg", corev1.ResourceRequirements{})
	first := ephemeral("debugger", "")
	p, err := pods.Get(ctx, "dbg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{first}
	if p, err = pods.UpdateEphemeralContainers(ctx, "dbg", p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	withPort := ephemeral("ports", "")
	withPort.Ports = []corev1.ContainerPort{{ContainerPort: 80}}
	withProbe := ephemeral("probe", "")
	withProbe.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	withRes := ephemeral("res", "")
	withRes.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	withHook := ephemeral("hook", "")
	withHook.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	cases := []struct {
		name  string
		ecs   func() []corev1.EphemeralContainer
		field string
	}{
		{"name of a regular container", func() []corev1.EphemeralContainer { return append(p.Spec.EphemeralContainers, ephemeral("c", "")) }, "spec.ephemeralContainers[1].name"},
		{"duplicate ephemeral name", func() []corev1.EphemeralContainer {
			return append(p.Spec.EphemeralContainers, ephemeral("debugger", ""))
		}, "spec.ephemeralContainers[1].name"},
		{"unknown target", func() []corev1.EphemeralContainer { return append(p.Spec.EphemeralContainers, ephemeral("x", "nope")) }, "spec.ephemeralContainers[1].targetContainerName"},
		{"ports", func() []corev1.EphemeralContainer { return append(p.Spec.EphemeralContainers, withPort) }, "spec.ephemeralContainers[1].ports"},
		{"probe", func() []corev1.EphemeralContainer { return append(p.Spec.EphemeralContainers, withProbe) }, "spec.ephemeralContainers[1].readinessProbe"},
		{"resources", func() []corev1.EphemeralContainer { return append(p.Spec.EphemeralContainers, withRes) }, "spec.ephemeralContainers[1].resources"},
		{"lifecycle", func() []corev1.EphemeralContainer { return append(p.Spec.EphemeralContainers, withHook) }, "spec.ephemeralContainers[1].lifecycle"},
		{"removed", func() []corev1.EphemeralContainer { return nil }, "spec.ephemeralContainers"},
		{"changed", func() []corev1.EphemeralContainer {
			ecs := []corev1.EphemeralContainer{*p.Spec.EphemeralContainers[0].DeepCopy()}
			ecs[0].Image = "nginx"
			return ecs
		}, "spec.ephemeralContainers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			upd := p.DeepCopy()
			upd.Spec.EphemeralContainers = tc.ecs()
			_, err := pods.UpdateEphemeralContainers(ctx, "dbg", upd, metav1.UpdateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want 422", err)
			}
			if !hasCause(err, tc.field) {
				t.Fatalf("error %v does not name %s", err, tc.field)
			}
		})
	}
}

func hasCause(err error, field string) bool {
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Field == field {
			return true
		}
	}
	return false
}

func requests(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
}

func TestResize_Subresource_ChangesOnlyResources(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	p := runningPod(t, pods, "rs", requests("100m", "100Mi"))

	// The main resource refuses resource changes.
	main := p.DeepCopy()
	main.Spec.Containers[0].Resources = requests("200m", "200Mi")
	if _, err := pods.Update(ctx, main, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("main resource resize: %v, want 422", err)
	}

	upd := p.DeepCopy()
	upd.Spec.Containers[0].Resources = requests("200m", "200Mi")
	upd.Spec.Containers[0].Image = "nginx" // not the subresource's: dropped
	got, err := pods.UpdateResize(ctx, "rs", upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("resize: %v", err)
	}
	cpu := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	if cpu.String() != "200m" || got.Generation != 2 || got.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("after resize: cpu %s generation %d image %s; want 200m, 2, busybox", cpu.String(), got.Generation, got.Spec.Containers[0].Image)
	}
	patch := `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m"}}}]}}`
	if got, err = pods.Patch(ctx, "rs", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize"); err != nil {
		t.Fatalf("resize patch: %v", err)
	}
	if cpu := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.String() != "300m" || got.Generation != 3 {
		t.Fatalf("after resize patch: cpu %s generation %d", cpu.String(), got.Generation)
	}
}

func TestResize_Subresource_RefusesInvalidResizes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	guaranteed := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
	}
	p := runningPod(t, pods, "rs", guaranteed)
	cases := []struct {
		name  string
		edit  func(*corev1.Pod)
		field string
	}{
		{"QoS class change", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
		}, "spec"},
		{"limit removed", func(p *corev1.Pod) {
			delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
		}, "spec.containers[0].resources.limits"},
		{"other resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["ephemeral-storage"] = resource.MustParse("1Gi")
		}, "spec"},
		{"container renamed", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "d" }, "spec.containers[0].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			upd := p.DeepCopy()
			tc.edit(upd)
			_, err := pods.UpdateResize(ctx, "rs", upd, metav1.UpdateOptions{})
			if !apierrors.IsInvalid(err) || !hasCause(err, tc.field) {
				t.Fatalf("got %v, want 422 naming %s", err, tc.field)
			}
		})
	}
}

func TestResize_NodeWithoutResourceStatus_Refused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pods := h.client.CoreV1().Pods("default")
	p := runningPod(t, pods, "old-node", requests("100m", "100Mi"))
	p.Status.ContainerStatuses[0].Resources = nil
	p, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Containers[0].Resources = requests("200m", "100Mi")
	if _, err := pods.UpdateResize(ctx, "old-node", p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("resize on a node that reports no resources: %v, want 422", err)
	}
}

func TestDiscovery_ListsPodSpecSubresources(t *testing.T) {
	h := newHarness(t)
	list, err := h.client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, r := range list.APIResources {
		found[r.Name] = strings.Join(r.Verbs, ",") == "get,patch,update"
	}
	for _, name := range []string{"pods/ephemeralcontainers", "pods/resize"} {
		if !found[name] {
			t.Errorf("%s not listed with get, patch, update", name)
		}
	}
}
