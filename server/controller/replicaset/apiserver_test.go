package replicaset

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/controller/controllertest"
	"skiff/store"
)

func replicaSet(name string, n int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

func podsOf(ctx context.Context, client kubernetes.Interface, rs *appsv1.ReplicaSet) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods(rs.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == rs.UID {
			out = append(out, p)
		}
	}
	return out, nil
}

func statusIs(ctx context.Context, client kubernetes.Interface, name string, want func(appsv1.ReplicaSetStatus, *appsv1.ReplicaSet) bool) func() (bool, error) {
	return func() (bool, error) {
		rs, err := client.AppsV1().ReplicaSets("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return rs.Status.ObservedGeneration == rs.Generation && want(rs.Status, rs), nil
	}
}

func TestReplicaSet_CreatesPodsFromTemplateAndReportsStatus(t *testing.T) {
	e := start(t, apitest.Options{})
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	rs, err := e.client.AppsV1().ReplicaSets("default").Create(e.ctx, replicaSet("web", 3), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "3 ready replicas", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool {
		return s.Replicas == 3 && s.ReadyReplicas == 3 && s.AvailableReplicas == 3 && s.FullyLabeledReplicas == 3
	}))
	pods, err := podsOf(e.ctx, e.client, rs)
	must(t, err)
	if len(pods) != 3 {
		t.Fatalf("pods = %d, want 3", len(pods))
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if !strings.HasPrefix(p.Name, "web-") || p.Labels["app"] != "web" || ref.Kind != "ReplicaSet" || ref.Name != "web" ||
			ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s: labels %v, controller %+v", p.Name, p.Labels, ref)
		}
	}
	if got := e.events.WithReason("SuccessfulCreate"); len(got) != 3 || !strings.HasPrefix(got[0].Message, "Created pod: web-") || got[0].Object != "web" {
		t.Errorf("SuccessfulCreate events = %+v, want 3 naming the pods", got)
	}

	// Scale down: two go, with events naming them.
	_, err = e.client.AppsV1().ReplicaSets("default").UpdateScale(e.ctx, "web", scale("web", 1), metav1.UpdateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "1 replica", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool {
		return s.Replicas == 1 && s.ReadyReplicas == 1
	}))
	waitFor(t, e.ctx, "pods deleted", func() (bool, error) {
		pods, err := podsOf(e.ctx, e.client, rs)
		return len(pods) == 1, err
	})
	if got := e.events.WithReason("SuccessfulDelete"); len(got) != 2 {
		t.Errorf("SuccessfulDelete events = %+v, want 2", got)
	}
}

func scale(name string, n int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
}

func TestReplicaSet_ScaleDown_DeletesNotReadyFirst(t *testing.T) {
	e := start(t, apitest.Options{})
	var unready atomic.Value
	unready.Store("")
	// The first pod the kubelet sees stays Pending: the one to go first.
	controllertest.Kubelet{Ready: func(p *corev1.Pod) bool {
		unready.CompareAndSwap("", p.Name)
		return unready.Load() != p.Name
	}}.Run(t, e.ctx, e.client)
	rs, err := e.client.AppsV1().ReplicaSets("default").Create(e.ctx, replicaSet("web", 3), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "2 of 3 ready", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool {
		return s.Replicas == 3 && s.ReadyReplicas == 2
	}))
	_, err = e.client.AppsV1().ReplicaSets("default").UpdateScale(e.ctx, "web", scale("web", 2), metav1.UpdateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "2 pods left", func() (bool, error) {
		pods, err := podsOf(e.ctx, e.client, rs)
		return len(pods) == 2, err
	})
	pods, err := podsOf(e.ctx, e.client, rs)
	must(t, err)
	for _, p := range pods {
		if p.Name == unready.Load() {
			t.Errorf("kept the pod that is not ready (%s) and deleted a ready one", p.Name)
		}
	}
}

func TestReplicaSet_AdoptsMatchingOrphansAndReleasesPodsThatStopMatching(t *testing.T) {
	e := start(t, apitest.Options{})
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	_, err := e.client.CoreV1().Pods("default").Create(e.ctx, orphan, metav1.CreateOptions{})
	must(t, err)
	rs, err := e.client.AppsV1().ReplicaSets("default").Create(e.ctx, replicaSet("web", 2), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "orphan adopted", func() (bool, error) {
		p, err := e.client.CoreV1().Pods("default").Get(e.ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == rs.UID, nil
	})
	waitFor(t, e.ctx, "2 replicas", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool { return s.Replicas == 2 }))
	if got := e.events.WithReason("SuccessfulCreate"); len(got) != 1 {
		t.Errorf("created %d pods, want 1 beside the adopted orphan", len(got))
	}

	// The adopted pod stops matching: it is let go and replaced.
	patch := []byte(`{"metadata":{"labels":{"app":"debug"}}}`)
	_, err = e.client.CoreV1().Pods("default").Patch(e.ctx, "orphan", types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, err)
	waitFor(t, e.ctx, "pod released", func() (bool, error) {
		p, err := e.client.CoreV1().Pods("default").Get(e.ctx, "orphan", metav1.GetOptions{})
		return err == nil && len(p.OwnerReferences) == 0, err
	})
	waitFor(t, e.ctx, "replacement created", func() (bool, error) {
		pods, err := podsOf(e.ctx, e.client, rs)
		return len(pods) == 2, err
	})
}

// denyPods refuses pod creation while deny is set, as a quota would.
type denyPods struct {
	deny  atomic.Bool
	tries atomic.Int32
}

func (d *denyPods) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	if a.Op != apiserver.OpCreate || a.Resource.Name != "pods" || !d.deny.Load() {
		return nil
	}
	d.tries.Add(1)
	return apierrors.NewForbidden(corev1.Resource("pods"), "", errQuota)
}

var errQuota = quotaError("exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0")

type quotaError string

func (e quotaError) Error() string { return string(e) }

func TestReplicaSet_CreateForbidden_SlowStartStopsAndReplicaFailureIsSet(t *testing.T) {
	deny := &denyPods{}
	deny.deny.Store(true)
	e := start(t, apitest.Options{Admission: func(store.Store) []apiserver.Admitter { return []apiserver.Admitter{deny} }})
	_, err := e.client.AppsV1().ReplicaSets("default").Create(e.ctx, replicaSet("web", 5), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "ReplicaFailure condition", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool {
		c := condition(s.Conditions, appsv1.ReplicaSetReplicaFailure)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "FailedCreate" && strings.Contains(c.Message, "exceeded quota")
	}))
	failed := e.events.WithReason("FailedCreate")
	if len(failed) == 0 || !strings.HasPrefix(failed[0].Message, "Error creating: ") || failed[0].Type != corev1.EventTypeWarning {
		t.Errorf("FailedCreate events = %+v", failed)
	}
	// Each sync tries one pod (the first slow-start batch), not five. The
	// events are recorded asynchronously, so one more sync may have tried
	// its pod without its event being seen yet.
	if tries, syncs := deny.tries.Load(), int32(len(failed)); tries < syncs || tries > syncs+1 {
		t.Errorf("%d creations tried in %d syncs, want one per sync", tries, syncs)
	}

	deny.deny.Store(false)
	waitFor(t, e.ctx, "pods created and the condition cleared", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool {
		return s.Replicas == 5 && condition(s.Conditions, appsv1.ReplicaSetReplicaFailure) == nil
	}))
}

func TestReplicaSet_TerminatingPodsAreReplacedAndReportedSeparately(t *testing.T) {
	e := start(t, apitest.Options{})
	controllertest.Kubelet{KeepTerminating: true}.Run(t, e.ctx, e.client)
	rs, err := e.client.AppsV1().ReplicaSets("default").Create(e.ctx, replicaSet("web", 2), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "2 ready", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool { return s.ReadyReplicas == 2 }))
	pods, err := podsOf(e.ctx, e.client, rs)
	must(t, err)
	// Bound pods are deleted gracefully: they stay, terminating.
	must(t, e.client.CoreV1().Pods("default").Delete(e.ctx, pods[0].Name, metav1.DeleteOptions{}))
	waitFor(t, e.ctx, "a replacement beside the terminating pod", statusIs(e.ctx, e.client, "web", func(s appsv1.ReplicaSetStatus, _ *appsv1.ReplicaSet) bool {
		return s.Replicas == 2 && s.ReadyReplicas == 2 && s.TerminatingReplicas != nil && *s.TerminatingReplicas == 1
	}))
	pods, err = podsOf(e.ctx, e.client, rs)
	must(t, err)
	if len(pods) != 3 {
		t.Errorf("pods = %d, want 2 running and 1 terminating", len(pods))
	}
}

func TestReplicaSet_MinReadySeconds_PodsBecomeAvailableLaterWithoutFurtherEvents(t *testing.T) {
	e := start(t, apitest.Options{})
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	w, err := e.client.AppsV1().ReplicaSets("default").Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=web"})
	must(t, err)
	defer w.Stop()
	rs := replicaSet("web", 2)
	rs.Spec.MinReadySeconds = 2
	_, err = e.client.AppsV1().ReplicaSets("default").Create(e.ctx, rs, metav1.CreateOptions{})
	must(t, err)
	// Nothing happens to the pods once they are ready: only the
	// controller's own requeue can make them available.
	readyNotAvailable := false
	for ev := range w.ResultChan() {
		rs, ok := ev.Object.(*appsv1.ReplicaSet)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		if rs.Status.ReadyReplicas == 2 && rs.Status.AvailableReplicas < 2 {
			readyNotAvailable = true
		}
		if rs.Status.AvailableReplicas == 2 {
			if !readyNotAvailable {
				t.Error("pods were available as soon as ready despite minReadySeconds")
			}
			return
		}
	}
	t.Fatal("watch ended before the pods became available")
}
