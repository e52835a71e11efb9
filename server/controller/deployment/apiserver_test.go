package deployment

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/controllertest"
)

func deployment(name string, n int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}},
			},
		},
	}
}

func rolling(d *appsv1.Deployment, surge, unavailable intstr.IntOrString) *appsv1.Deployment {
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
	return d
}

// notBroken is the kubelet's readiness rule: image "broken" never starts.
func notBroken(p *corev1.Pod) bool { return p.Spec.Containers[0].Image != "broken" }

func (e *env) get(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d, err := e.client.AppsV1().Deployments("default").Get(e.ctx, name, metav1.GetOptions{})
	must(t, err)
	return d
}

// replicaSets lists the ReplicaSets d controls, oldest first.
func (e *env) replicaSets(t *testing.T, d *appsv1.Deployment) []appsv1.ReplicaSet {
	t.Helper()
	list, err := e.client.AppsV1().ReplicaSets("default").List(e.ctx, metav1.ListOptions{})
	must(t, err)
	var out []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
			out = append(out, rs)
		}
	}
	return out
}

// waitRolledOut waits as `kubectl rollout status` does.
func (e *env) waitRolledOut(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	waitFor(t, e.ctx, name+" rolled out", func() (bool, error) {
		var err error
		d, err = e.client.AppsV1().Deployments("default").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s, r := d.Status, *d.Spec.Replicas
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == r && s.Replicas == r && s.AvailableReplicas == r, nil
	})
	return d
}

func (e *env) patch(t *testing.T, name string, pt types.PatchType, patch string) {
	t.Helper()
	_, err := e.client.AppsV1().Deployments("default").Patch(e.ctx, name, pt, []byte(patch), metav1.PatchOptions{})
	must(t, err)
}

func setImage(image string) string {
	return fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":%q}]}}}}`, image)
}

// podWatch follows the pods of the namespace and runs check on every
// change, recording what it reports.
type podWatch struct {
	mu         sync.Mutex
	pods       map[string]*corev1.Pod
	violations []string
	events     int
	w          watch.Interface
	done       chan struct{}
}

func watchPods(t *testing.T, e *env, check func(pods map[string]*corev1.Pod) string) *podWatch {
	t.Helper()
	list, err := e.client.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
	must(t, err)
	w, err := e.client.CoreV1().Pods("default").Watch(e.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	must(t, err)
	pw := &podWatch{pods: map[string]*corev1.Pod{}, w: w, done: make(chan struct{})}
	for i := range list.Items {
		pw.pods[list.Items[i].Name] = &list.Items[i]
	}
	go func() {
		defer close(pw.done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(pw.pods, pod.Name)
			} else {
				pw.pods[pod.Name] = pod
			}
			pw.events++
			if v := check(pw.pods); v != "" && len(pw.violations) < 5 {
				pw.violations = append(pw.violations, v)
			}
			pw.mu.Unlock()
		}
	}()
	return pw
}

func (pw *podWatch) stop() ([]string, int) {
	pw.w.Stop()
	<-pw.done
	return pw.violations, pw.events
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestDeployment_Create_MakesHashedReplicaSetAndRecordsEvents(t *testing.T) {
	e := start(t, func(c kubernetes.Interface) record.EventRecorder {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
		t.Cleanup(b.Shutdown)
		return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "deployment-controller"})
	})
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, deployment("web", 3), metav1.CreateOptions{})
	must(t, err)
	d := e.waitRolledOut(t, "web")
	rss := e.replicaSets(t, d)
	if len(rss) != 1 {
		t.Fatalf("%d replica sets, want 1", len(rss))
	}
	rs := rss[0]
	hash := rs.Labels[hashLabel]
	want := map[string]string{revisionAnnotation: "1", desiredReplicasAnnotation: "3", maxReplicasAnnotation: "4"}
	for k, v := range want {
		if rs.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if hash == "" || rs.Name != "web-"+hash || rs.Spec.Selector.MatchLabels[hashLabel] != hash || rs.Spec.Template.Labels[hashLabel] != hash || *rs.Spec.Replicas != 3 {
		t.Errorf("replica set %s: labels %v, selector %v, template labels %v", rs.Name, rs.Labels, rs.Spec.Selector, rs.Spec.Template.Labels)
	}
	if ref := metav1.GetControllerOf(&rs); ref.Kind != "Deployment" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller reference = %+v", ref)
	}
	if d.Annotations[revisionAnnotation] != "1" {
		t.Errorf("deployment revision annotation = %q, want 1", d.Annotations[revisionAnnotation])
	}
	waitFor(t, e.ctx, "complete conditions", func() (bool, error) {
		d := e.get(t, "web")
		a, p := getCondition(&d.Status, appsv1.DeploymentAvailable), getCondition(&d.Status, appsv1.DeploymentProgressing)
		return a != nil && a.Status == corev1.ConditionTrue && a.Reason == reasonMinimumAvailable &&
			p != nil && p.Status == corev1.ConditionTrue && p.Reason == reasonNewRSAvailable &&
			p.Message == fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs.Name), nil
	})
	// What `kubectl describe deployment` lists.
	waitFor(t, e.ctx, "ScalingReplicaSet event", func() (bool, error) {
		events, err := e.client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "ScalingReplicaSet" && ev.InvolvedObject.Kind == "Deployment" && ev.InvolvedObject.Name == "web" &&
				ev.Message == fmt.Sprintf("Scaled up replica set %s from 0 to 3", rs.Name) {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestDeployment_RollingUpdate_StaysWithinSurgeAndUnavailability(t *testing.T) {
	cases := []struct {
		name               string
		replicas           int32
		surge, unavailable intstr.IntOrString
		maxPods, minReady  int
		change             string
	}{
		{"surge 1, unavailable 0, new image", 3, intstr.FromInt32(1), intstr.FromInt32(0), 4, 3, setImage("nginx:2")},
		// 25% of 10: surge rounds up to 3, unavailable down to 2.
		{"25%/25% of 10, kubectl rollout restart", 10, intstr.FromString("25%"), intstr.FromString("25%"), 13, 8,
			`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-01-01T00:00:00Z"}}}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, nil)
			controllertest.Kubelet{}.Run(t, e.ctx, e.client)
			_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, rolling(deployment("web", tc.replicas), tc.surge, tc.unavailable), metav1.CreateOptions{})
			must(t, err)
			e.waitRolledOut(t, "web")
			maxSeen := 0
			pw := watchPods(t, e, func(pods map[string]*corev1.Pod) string {
				total, ready := 0, 0
				for _, p := range pods {
					if p.DeletionTimestamp != nil {
						continue
					}
					total++
					if podReady(p) {
						ready++
					}
				}
				maxSeen = max(maxSeen, total)
				if total > tc.maxPods || ready < tc.minReady {
					return fmt.Sprintf("%d pods, %d ready", total, ready)
				}
				return ""
			})
			e.patch(t, "web", types.StrategicMergePatchType, tc.change)
			d := e.waitRolledOut(t, "web")
			violations, events := pw.stop()
			if len(violations) > 0 {
				t.Errorf("limits of %d pods and %d ready broken: %v", tc.maxPods, tc.minReady, violations)
			}
			if events == 0 || maxSeen <= int(tc.replicas) {
				t.Errorf("the watch saw %d events and at most %d pods: no surge observed", events, maxSeen)
			}
			rss := e.replicaSets(t, d)
			if len(rss) != 2 {
				t.Fatalf("%d replica sets, want old and new", len(rss))
			}
			for _, rs := range rss {
				wantReplicas := int32(0)
				if rs.Annotations[revisionAnnotation] == "2" {
					wantReplicas = tc.replicas
				}
				if *rs.Spec.Replicas != wantReplicas {
					t.Errorf("replica set %s (revision %s) has %d replicas, want %d", rs.Name, rs.Annotations[revisionAnnotation], *rs.Spec.Replicas, wantReplicas)
				}
			}
		})
	}
}

func TestDeployment_Recreate_NeverRunsOldAndNewPodsTogether(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	d := deployment("web", 3)
	d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, d, metav1.CreateOptions{})
	must(t, err)
	e.waitRolledOut(t, "web")
	hashes := map[string]bool{}
	pw := watchPods(t, e, func(pods map[string]*corev1.Pod) string {
		now := map[string]bool{}
		for _, p := range pods {
			// Terminating pods count: their containers may still run.
			now[p.Labels[hashLabel]] = true
			hashes[p.Labels[hashLabel]] = true
		}
		if len(now) > 1 {
			return fmt.Sprintf("pods of templates %v at once", now)
		}
		return ""
	})
	e.patch(t, "web", types.StrategicMergePatchType, setImage("nginx:2"))
	e.waitRolledOut(t, "web")
	violations, _ := pw.stop()
	if len(violations) > 0 {
		t.Errorf("old and new pods together: %v", violations)
	}
	if len(hashes) != 2 {
		t.Errorf("the watch saw pods of %d templates, want the old and the new", len(hashes))
	}
}

// undo does what `kubectl rollout undo --to-revision` does: it finds the
// ReplicaSet of the revision among those the Deployment controls and puts
// its template (without the hash label) and annotations on the Deployment.
func undo(t *testing.T, e *env, name, revision string) {
	t.Helper()
	d := e.get(t, name)
	for _, rs := range e.replicaSets(t, d) {
		if rs.Annotations[revisionAnnotation] != revision {
			continue
		}
		tmpl := rs.Spec.Template.DeepCopy()
		delete(tmpl.Labels, hashLabel)
		annotations := map[string]string{}
		for k, v := range d.Annotations {
			if skippedAnnotations[k] {
				annotations[k] = v
			}
		}
		for k, v := range rs.Annotations {
			if !skippedAnnotations[k] {
				annotations[k] = v
			}
		}
		patch, err := json.Marshal([]map[string]any{
			{"op": "replace", "path": "/spec/template", "value": tmpl},
			{"op": "replace", "path": "/metadata/annotations", "value": annotations},
		})
		must(t, err)
		e.patch(t, name, types.JSONPatchType, string(patch))
		return
	}
	t.Fatalf("no replica set of revision %s", revision)
}

func TestDeployment_Undo_ReusesOldReplicaSetAndBumpsItsRevision(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, deployment("web", 2), metav1.CreateOptions{})
	must(t, err)
	d := e.waitRolledOut(t, "web")
	first := e.replicaSets(t, d)[0]
	e.patch(t, "web", types.StrategicMergePatchType, setImage("nginx:2"))
	e.waitRolledOut(t, "web")

	undo(t, e, "web", "1")
	d = e.waitRolledOut(t, "web")
	rss := e.replicaSets(t, d)
	if len(rss) != 2 {
		t.Fatalf("%d replica sets after undo, want the 2 there were", len(rss))
	}
	for _, rs := range rss {
		if rs.Name != first.Name {
			continue
		}
		if rs.Annotations[revisionAnnotation] != "3" || rs.Annotations[revisionHistoryAnnotation] != "1" || *rs.Spec.Replicas != 2 {
			t.Errorf("reused replica set: revision %q, history %q, replicas %d; want 3, 1, 2",
				rs.Annotations[revisionAnnotation], rs.Annotations[revisionHistoryAnnotation], *rs.Spec.Replicas)
		}
	}
	waitFor(t, e.ctx, "deployment revision 3", func() (bool, error) {
		return e.get(t, "web").Annotations[revisionAnnotation] == "3", nil
	})
}

func TestDeployment_ScaledMidRollout_ScalesReplicaSetsProportionally(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{Ready: notBroken}.Run(t, e.ctx, e.client)
	_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, rolling(deployment("web", 10), intstr.FromString("25%"), intstr.FromString("25%")), metav1.CreateOptions{})
	must(t, err)
	d := e.waitRolledOut(t, "web")
	old := e.replicaSets(t, d)[0].Name
	// The new pods never start: the rollout stops at 8 old and 5 new (13
	// = 10 + surge 3 (25% rounded up), 8 = 10 - unavailable 2 (rounded
	// down)).
	e.patch(t, "web", types.StrategicMergePatchType, setImage("broken"))
	sizes := func(wantOld, wantNew int32) func() (bool, error) {
		return func() (bool, error) {
			rss := e.replicaSets(t, d)
			if len(rss) != 2 {
				return false, nil
			}
			for _, rs := range rss {
				if (rs.Name == old && *rs.Spec.Replicas != wantOld) || (rs.Name != old && *rs.Spec.Replicas != wantNew) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	waitFor(t, e.ctx, "rollout stuck at 8 old, 5 new", sizes(8, 5))
	// 30 replicas allow 38 pods (surge 8): the 25 more are shared 15 to
	// the old and 10 to the new, as 8:5.
	e.patch(t, "web", types.MergePatchType, `{"spec":{"replicas":30}}`)
	waitFor(t, e.ctx, "23 old, 15 new", sizes(23, 15))
	for _, rs := range e.replicaSets(t, d) {
		if rs.Annotations[desiredReplicasAnnotation] != "30" || rs.Annotations[maxReplicasAnnotation] != "38" {
			t.Errorf("%s annotations: %v", rs.Name, rs.Annotations)
		}
	}
}

func TestDeployment_RevisionHistoryLimit_DeletesOldestUnusedReplicaSets(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	d := deployment("web", 1)
	d.Spec.RevisionHistoryLimit = new(int32(1))
	_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, d, metav1.CreateOptions{})
	must(t, err)
	e.waitRolledOut(t, "web")
	for _, image := range []string{"nginx:2", "nginx:3"} {
		e.patch(t, "web", types.StrategicMergePatchType, setImage(image))
		d = e.waitRolledOut(t, "web")
	}
	waitFor(t, e.ctx, "revision 1 deleted", func() (bool, error) {
		rss := e.replicaSets(t, d)
		revisions := map[string]bool{}
		for _, rs := range rss {
			revisions[rs.Annotations[revisionAnnotation]] = true
		}
		return len(rss) == 2 && revisions["2"] && revisions["3"], nil
	})
}

func TestDeployment_ProgressDeadlineExceeded_ThenRecovers(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{Ready: notBroken}.Run(t, e.ctx, e.client)
	d := deployment("web", 1)
	d.Spec.ProgressDeadlineSeconds = new(int32(1))
	d.Spec.Template.Spec.Containers[0].Image = "broken"
	_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, d, metav1.CreateOptions{})
	must(t, err)
	progressing := func(status corev1.ConditionStatus, reason string) func() (bool, error) {
		return func() (bool, error) {
			d := e.get(t, "web")
			c := getCondition(&d.Status, appsv1.DeploymentProgressing)
			return d.Status.ObservedGeneration == d.Generation && c != nil && c.Status == status && c.Reason == reason, nil
		}
	}
	waitFor(t, e.ctx, "ProgressDeadlineExceeded", progressing(corev1.ConditionFalse, reasonTimedOut))
	d = e.get(t, "web")
	if c := getCondition(&d.Status, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != reasonMinimumUnavailable {
		t.Errorf("Available condition = %+v, want False/MinimumReplicasUnavailable", c)
	}
	e.patch(t, "web", types.StrategicMergePatchType, setImage("nginx:1"))
	e.waitRolledOut(t, "web")
	waitFor(t, e.ctx, "NewReplicaSetAvailable", progressing(corev1.ConditionTrue, reasonNewRSAvailable))
}

func TestDeployment_Paused_ScalesButDoesNotRollOut(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	_, err := e.client.AppsV1().Deployments("default").Create(e.ctx, deployment("web", 2), metav1.CreateOptions{})
	must(t, err)
	d := e.waitRolledOut(t, "web")
	e.patch(t, "web", types.MergePatchType, `{"spec":{"paused":true}}`)
	e.patch(t, "web", types.StrategicMergePatchType, setImage("nginx:2"))
	e.patch(t, "web", types.MergePatchType, `{"spec":{"replicas":4}}`)
	waitFor(t, e.ctx, "paused condition and the old replica set scaled", func() (bool, error) {
		d := e.get(t, "web")
		c := getCondition(&d.Status, appsv1.DeploymentProgressing)
		rss := e.replicaSets(t, d)
		return d.Status.ObservedGeneration == d.Generation && c != nil && c.Reason == reasonPaused && c.Status == corev1.ConditionUnknown &&
			len(rss) == 1 && *rss[0].Spec.Replicas == 4, nil
	})
	e.patch(t, "web", types.MergePatchType, `{"spec":{"paused":false}}`)
	d = e.waitRolledOut(t, "web")
	if rss := e.replicaSets(t, d); len(rss) != 2 {
		t.Errorf("%d replica sets after resume, want 2", len(rss))
	}
}

func TestDeployment_AdoptsMatchingOrphanReplicaSetAndReleasesItWhenLabelsChange(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	tmpl := deployment("web", 2).Spec.Template
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-orphan", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       appsv1.ReplicaSetSpec{Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: tmpl},
	}
	_, err := e.client.AppsV1().ReplicaSets("default").Create(e.ctx, orphan, metav1.CreateOptions{})
	must(t, err)
	_, err = e.client.AppsV1().Deployments("default").Create(e.ctx, deployment("web", 2), metav1.CreateOptions{})
	must(t, err)
	d := e.waitRolledOut(t, "web")
	rss := e.replicaSets(t, d)
	if len(rss) != 1 || rss[0].Name != "web-orphan" || rss[0].Annotations[revisionAnnotation] != "1" {
		t.Fatalf("controlled replica sets = %v, want the adopted web-orphan at revision 1", names(rss))
	}

	_, err = e.client.AppsV1().ReplicaSets("default").Patch(e.ctx, "web-orphan", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"released"}}}`), metav1.PatchOptions{})
	must(t, err)
	waitFor(t, e.ctx, "release and a replacement replica set", func() (bool, error) {
		rs, err := e.client.AppsV1().ReplicaSets("default").Get(e.ctx, "web-orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rss := e.replicaSets(t, d)
		return len(rs.OwnerReferences) == 0 && len(rss) == 1 && rss[0].Name != "web-orphan", nil
	})
}

func names(rss []appsv1.ReplicaSet) []string {
	var out []string
	for _, rs := range rss {
		out = append(out, rs.Name)
	}
	return out
}

func TestDeployment_HashCollision_BumpsCollisionCountAndUsesAnotherName(t *testing.T) {
	e := start(t, nil)
	controllertest.Kubelet{}.Run(t, e.ctx, e.client)
	// Paused, the Deployment makes no ReplicaSet until the name it would
	// take is squatted by another, unrelated one.
	d := deployment("web", 1)
	d.Spec.Paused = true
	d, err := e.client.AppsV1().Deployments("default").Create(e.ctx, d, metav1.CreateOptions{})
	must(t, err)
	taken := "web-" + templateHash(&d.Spec.Template, nil)
	squatter := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: taken, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "other"}}}}},
	}
	_, err = e.client.AppsV1().ReplicaSets("default").Create(e.ctx, squatter, metav1.CreateOptions{})
	must(t, err)
	e.patch(t, "web", types.MergePatchType, `{"spec":{"paused":false}}`)
	d = e.waitRolledOut(t, "web")
	if d.Status.CollisionCount == nil || *d.Status.CollisionCount != 1 {
		t.Errorf("collisionCount = %v, want 1", d.Status.CollisionCount)
	}
	rss := e.replicaSets(t, d)
	if len(rss) != 1 || rss[0].Name == taken || rss[0].Name != "web-"+templateHash(&d.Spec.Template, d.Status.CollisionCount) {
		t.Errorf("replica sets %v; %s was taken", names(rss), taken)
	}
}
