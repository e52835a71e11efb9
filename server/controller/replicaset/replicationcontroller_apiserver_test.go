package replicaset

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/controller/controllertest"
	"skiff/server/controller/garbagecollector"
	"skiff/store"
)

type rcEnv struct {
	ctx    context.Context
	client kubernetes.Interface
	events *controllertest.Recorder
}

type rcOptions struct {
	api apitest.Options
	// apiEvents records to the API server instead of the test recorder,
	// to check what kubectl describe would show.
	apiEvents bool
	// gc runs the garbage collector beside the controller.
	gc bool
}

func startRC(t *testing.T, opts rcOptions) *rcEnv {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{API: opts.api, Namespaces: []string{"default"}, Timeout: 45 * time.Second})
	var rec record.EventRecorder = ce.Events
	if opts.apiEvents {
		rec = controllertest.APIRecorder(t, ce.Client, "replicationcontroller-controller")
	}
	log := controllertest.Logger(t, slog.LevelInfo)
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
		return RunReplicationControllers(ctx, Config{Client: ce.Client, Informers: ce.Informers, Recorder: rec, Logger: log})
	})
	if opts.gc {
		controllertest.Run(t, ce.Ctx, func(ctx context.Context) error {
			return garbagecollector.Run(ctx, garbagecollector.Config{Metadata: metadata.NewForConfigOrDie(ce.Config),
				Discovery: discovery.NewDiscoveryClientForConfigOrDie(ce.Config), Logger: log})
		})
	}
	return &rcEnv{ctx: ce.Ctx, client: ce.Client, events: ce.Events}
}

func replicationController(name string, n int32) *corev1.ReplicationController {
	labels := map[string]string{"app": name}
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &n,
			Selector: labels,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// podsControlledBy lists the pods whose controller is uid, terminating
// ones included.
func podsControlledBy(ctx context.Context, client kubernetes.Interface, uid types.UID) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == uid {
			out = append(out, p)
		}
	}
	return out, nil
}

func rcStatusIs(ctx context.Context, client kubernetes.Interface, name string, want func(corev1.ReplicationControllerStatus) bool) func() (bool, error) {
	return func() (bool, error) {
		rc, err := client.CoreV1().ReplicationControllers("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return rc.Status.ObservedGeneration == rc.Generation && want(rc.Status), nil
	}
}

func TestReplicationController_CreatesOwnedPodsAndReplacesADeletedOne(t *testing.T) {
	e := startRC(t, rcOptions{apiEvents: true})
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	rc, err := e.client.CoreV1().ReplicationControllers("default").Create(e.ctx, replicationController("web", 3), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "3 ready replicas", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool {
		return s.Replicas == 3 && s.ReadyReplicas == 3 && s.AvailableReplicas == 3 && s.FullyLabeledReplicas == 3
	}))
	pods, err := podsControlledBy(e.ctx, e.client, rc.UID)
	must(t, err)
	if len(pods) != 3 {
		t.Fatalf("pods = %d, want 3", len(pods))
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if !strings.HasPrefix(p.Name, "web-") || ref.APIVersion != "v1" || ref.Kind != "ReplicationController" || ref.Name != "web" ||
			ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s: controller %+v", p.Name, ref)
		}
	}

	// A deleted pod is replaced, and the RC keeps its count.
	must(t, e.client.CoreV1().Pods("default").Delete(e.ctx, pods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	waitFor(t, e.ctx, "a replacement", func() (bool, error) {
		now, err := podsControlledBy(e.ctx, e.client, rc.UID)
		if err != nil || len(now) != 3 {
			return false, err
		}
		for _, p := range now {
			if p.Name == pods[0].Name {
				return false, nil
			}
		}
		return true, nil
	})
	waitFor(t, e.ctx, "3 ready again", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool {
		return s.Replicas == 3 && s.ReadyReplicas == 3
	}))

	// Events are on the RC itself, where kubectl describe rc looks.
	waitFor(t, e.ctx, "SuccessfulCreate events on the ReplicationController", func() (bool, error) {
		evs, err := e.client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Reason == "SuccessfulCreate" && ev.InvolvedObject.Kind == "ReplicationController" && ev.InvolvedObject.Name == "web" &&
				ev.InvolvedObject.UID == rc.UID && strings.HasPrefix(ev.Message, "Created pod: web-") {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestReplicationController_ScaleSubresource_ControllerConverges(t *testing.T) {
	e := startRC(t, rcOptions{})
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	rc, err := e.client.CoreV1().ReplicationControllers("default").Create(e.ctx, replicationController("web", 1), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "1 replica", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool { return s.ReadyReplicas == 1 }))
	for _, n := range []int32{4, 2} {
		sc, err := e.client.CoreV1().ReplicationControllers("default").GetScale(e.ctx, "web", metav1.GetOptions{})
		must(t, err)
		sc.ResourceVersion = ""
		sc.Spec.Replicas = n
		_, err = e.client.CoreV1().ReplicationControllers("default").UpdateScale(e.ctx, "web", sc, metav1.UpdateOptions{})
		must(t, err)
		waitFor(t, e.ctx, "scaled status", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool {
			return s.Replicas == n && s.ReadyReplicas == n
		}))
		waitFor(t, e.ctx, "scaled pods", func() (bool, error) {
			pods, err := podsControlledBy(e.ctx, e.client, rc.UID)
			return len(pods) == int(n), err
		})
		sc, err = e.client.CoreV1().ReplicationControllers("default").GetScale(e.ctx, "web", metav1.GetOptions{})
		must(t, err)
		if sc.Status.Replicas != n || sc.Status.Selector != "app=web" {
			t.Errorf("scale status = %+v, want %d replicas selected by app=web", sc.Status, n)
		}
	}
	if got := len(e.events.WithReason("SuccessfulDelete")); got != 2 {
		t.Errorf("SuccessfulDelete events = %d, want 2", got)
	}
}

func TestReplicationController_AdoptsMatchingOrphansAndReleasesPodsThatStopMatching(t *testing.T) {
	e := startRC(t, rcOptions{})
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	_, err := e.client.CoreV1().Pods("default").Create(e.ctx, orphan, metav1.CreateOptions{})
	must(t, err)
	rc, err := e.client.CoreV1().ReplicationControllers("default").Create(e.ctx, replicationController("web", 1), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "orphan adopted", func() (bool, error) {
		p, err := e.client.CoreV1().Pods("default").Get(e.ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.UID == rc.UID && ref.Kind == "ReplicationController" && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion, nil
	})
	waitFor(t, e.ctx, "1 replica", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool { return s.Replicas == 1 }))
	if got := e.events.WithReason("SuccessfulCreate"); len(got) != 0 {
		t.Errorf("created %d pods, want none beside the adopted orphan", len(got))
	}

	patch := []byte(`{"metadata":{"labels":{"app":"debug"}}}`)
	_, err = e.client.CoreV1().Pods("default").Patch(e.ctx, "orphan", types.MergePatchType, patch, metav1.PatchOptions{})
	must(t, err)
	waitFor(t, e.ctx, "pod released", func() (bool, error) {
		p, err := e.client.CoreV1().Pods("default").Get(e.ctx, "orphan", metav1.GetOptions{})
		return err == nil && len(p.OwnerReferences) == 0, err
	})
	waitFor(t, e.ctx, "replacement created", func() (bool, error) {
		pods, err := podsControlledBy(e.ctx, e.client, rc.UID)
		return len(pods) == 1 && pods[0].Name != "orphan", err
	})
}

func TestReplicationController_CreateForbidden_ReplicaFailureSetThenCleared(t *testing.T) {
	deny := &denyPods{}
	deny.deny.Store(true)
	e := startRC(t, rcOptions{api: apitest.Options{Admission: func(store.Store) []apiserver.Admitter { return []apiserver.Admitter{deny} }}})
	_, err := e.client.CoreV1().ReplicationControllers("default").Create(e.ctx, replicationController("web", 3), metav1.CreateOptions{})
	must(t, err)
	waitFor(t, e.ctx, "ReplicaFailure condition", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool {
		for _, c := range s.Conditions {
			if c.Type == corev1.ReplicationControllerReplicaFailure && c.Status == corev1.ConditionTrue && c.Reason == "FailedCreate" &&
				strings.Contains(c.Message, "exceeded quota") {
				return true
			}
		}
		return false
	}))
	if failed := e.events.WithReason("FailedCreate"); len(failed) == 0 || failed[0].Object != "web" {
		t.Errorf("FailedCreate events = %+v", failed)
	}
	deny.deny.Store(false)
	waitFor(t, e.ctx, "pods created and the condition cleared", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool {
		return s.Replicas == 3 && len(s.Conditions) == 0
	}))
}

// The pods' controller references let the garbage collector act on them
// for each propagation policy.
func TestReplicationController_Deletion_GarbageCollectorHonoursPropagation(t *testing.T) {
	bg, fg, orphan := metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan
	for _, tc := range []struct {
		policy   metav1.DeletionPropagation
		wantPods int // left once the RC is gone
	}{
		{bg, 0},
		{fg, 0},
		{orphan, 2},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			e := startRC(t, rcOptions{gc: true})
			controllertest.Kubelet{}.Run(t, e.ctx, e.client)
			rcs := e.client.CoreV1().ReplicationControllers("default")
			rc, err := rcs.Create(e.ctx, replicationController("web", 2), metav1.CreateOptions{})
			must(t, err)
			waitFor(t, e.ctx, "2 ready", rcStatusIs(e.ctx, e.client, "web", func(s corev1.ReplicationControllerStatus) bool { return s.ReadyReplicas == 2 }))
			must(t, rcs.Delete(e.ctx, "web", metav1.DeleteOptions{PropagationPolicy: &tc.policy}))
			waitFor(t, e.ctx, "the RC gone", func() (bool, error) {
				_, err := rcs.Get(e.ctx, "web", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if tc.policy == fg {
				// Foreground: the RC goes only after its pods.
				if pods, err := podsControlledBy(e.ctx, e.client, rc.UID); err != nil || len(pods) != 0 {
					t.Errorf("RC gone before its pods (%d left, %v)", len(pods), err)
				}
			}
			waitFor(t, e.ctx, "pods collected or orphaned", func() (bool, error) {
				list, err := e.client.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				for _, p := range list.Items {
					if len(p.OwnerReferences) != 0 {
						return false, nil
					}
				}
				return len(list.Items) == tc.wantPods, nil
			})
			if got := len(e.events.WithReason("SuccessfulCreate")); got != 2 {
				t.Errorf("SuccessfulCreate events = %d, want 2: no replacements while the RC was being deleted", got)
			}
		})
	}
}
