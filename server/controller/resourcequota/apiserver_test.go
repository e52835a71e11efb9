package resourcequota

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"

	"skiff/server/controller/controllertest"
	"skiff/server/quota"
)

const (
	ns = "quota-test"
	// never is a resync period no test lasts: what such a test sees was
	// done by events.
	never = time.Hour
	// waitLimit bounds each wait; the in-process server answers in
	// milliseconds.
	waitLimit = 20 * time.Second
)

func start(t *testing.T, resync time.Duration) *controllertest.Env {
	t.Helper()
	e := controllertest.Start(t, controllertest.Options{Namespaces: []string{ns}, Timeout: 2 * time.Minute})
	md := metadata.NewForConfigOrDie(e.Config)
	controllertest.Run(t, e.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: e.Client, Informers: e.Informers, Metadata: md, Discovery: e.Client.Discovery(),
			Logger: controllertest.Logger(t, slog.LevelWarn), ResyncPeriod: resync, Workers: 2})
	})
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func createQuota(t *testing.T, e *controllertest.Env, name string, hard corev1.ResourceList) {
	t.Helper()
	_, err := e.Client.CoreV1().ResourceQuotas(ns).Create(e.Ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}, metav1.CreateOptions{})
	must(t, err)
}

// lastSeen is the status a wait saw last, for its failure message.
type lastSeen struct{ status *corev1.ResourceQuotaStatus }

func (l *lastSeen) String() string {
	if l.status == nil {
		return "no quota"
	}
	return fmt.Sprintf("hard %s used %s", quota.PrettyPrint(l.status.Hard), quota.PrettyPrint(l.status.Used))
}

// waitUsed waits until the quota's status.hard is its spec.hard and used
// holds want (other used names are not looked at).
func waitUsed(t *testing.T, e *controllertest.Env, name string, want corev1.ResourceList) {
	t.Helper()
	seen := &lastSeen{}
	controllertest.Eventually(t, e.Ctx, waitLimit, func(ctx context.Context) (bool, error) {
		q, err := e.Client.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		seen.status = &q.Status
		if !quota.Equals(q.Spec.Hard, q.Status.Hard) {
			return false, nil
		}
		for k, v := range want {
			if got, ok := q.Status.Used[k]; !ok || got.Cmp(v) != 0 {
				return false, nil
			}
		}
		return true, nil
	}, "quota %s to use %s; last %v", name, quota.PrettyPrint(want), seen)
}

func configMap(t *testing.T, e *controllertest.Env, name string) {
	t.Helper()
	_, err := e.Client.CoreV1().ConfigMaps(ns).Create(e.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
}

func pod(t *testing.T, e *controllertest.Env, name, cpu string) *corev1.Pod {
	t.Helper()
	p, err := e.Client.CoreV1().Pods(ns).Create(e.Ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: list("cpu", cpu, "memory", "64Mi")}}}},
	}, metav1.CreateOptions{})
	must(t, err)
	return p
}

func TestQuota_Created_StatusPromptlyHasHardAndUsed(t *testing.T) {
	e := start(t, never)
	hard := list("resourcequotas", "5", "count/configmaps", "10", "pods", "4", "requests.cpu", "1", "services.nodeports", "2")
	createQuota(t, e, "q", hard)
	waitUsed(t, e, "q", list("resourcequotas", "1", "count/configmaps", "0", "pods", "0", "requests.cpu", "0", "services.nodeports", "0"))
	q, err := e.Client.CoreV1().ResourceQuotas(ns).Get(e.Ctx, "q", metav1.GetOptions{})
	must(t, err)
	if len(q.Status.Used) != len(hard) {
		t.Errorf("used = %s, want exactly the names of hard %s", quota.PrettyPrint(q.Status.Used), quota.PrettyPrint(hard))
	}
}

func TestQuota_SpecChanged_StatusFollows(t *testing.T) {
	e := start(t, never)
	createQuota(t, e, "q", list("configmaps", "3"))
	waitUsed(t, e, "q", list("configmaps", "0"))
	configMap(t, e, "a")
	// The controller may write status between our read and our write (the
	// configmap's charge), so the spec change retries on conflict as a client must.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := e.Client.CoreV1().ResourceQuotas(ns).Get(e.Ctx, "q", metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.Hard = list("configmaps", "5", "secrets", "2")
		_, err = e.Client.CoreV1().ResourceQuotas(ns).Update(e.Ctx, q, metav1.UpdateOptions{})
		return err
	}))
	// The spec change measures anew: the configmap created since counts.
	waitUsed(t, e, "q", list("configmaps", "1", "secrets", "0"))
}

func TestQuota_ObjectsCreatedLater_CountedByResync(t *testing.T) {
	// No admission charges creates here, so only the full resync counts.
	e := start(t, 200*time.Millisecond)
	createQuota(t, e, "q", list("count/configmaps", "10"))
	waitUsed(t, e, "q", list("count/configmaps", "0"))
	configMap(t, e, "a")
	configMap(t, e, "b")
	waitUsed(t, e, "q", list("count/configmaps", "2"))
}

func TestQuota_ObjectDeleted_UsageGivenBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		create   func(t *testing.T, e *controllertest.Env, name string)
		del      func(e *controllertest.Env, name string) error
	}{
		{"configmap", "count/configmaps", configMap, func(e *controllertest.Env, name string) error {
			return e.Client.CoreV1().ConfigMaps(ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
		}},
		{"configmap legacy name", "configmaps", configMap, func(e *controllertest.Env, name string) error {
			return e.Client.CoreV1().ConfigMaps(ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
		}},
		{"secret", "secrets", func(t *testing.T, e *controllertest.Env, name string) {
			_, err := e.Client.CoreV1().Secrets(ns).Create(e.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			must(t, err)
		}, func(e *controllertest.Env, name string) error {
			return e.Client.CoreV1().Secrets(ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
		}},
		{"replicaset", "count/replicasets.apps", func(t *testing.T, e *controllertest.Env, name string) {
			zero := int32(0)
			labels := map[string]string{"app": name}
			_, err := e.Client.AppsV1().ReplicaSets(ns).Create(e.Ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
			}, metav1.CreateOptions{})
			must(t, err)
		}, func(e *controllertest.Env, name string) error {
			return e.Client.AppsV1().ReplicaSets(ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
		}},
		{"pod", "count/pods", func(t *testing.T, e *controllertest.Env, name string) { pod(t, e, name, "100m") },
			func(e *controllertest.Env, name string) error {
				return e.Client.CoreV1().Pods(ns).Delete(e.Ctx, name, *metav1.NewDeleteOptions(0))
			}},
		{"pvc", "persistentvolumeclaims", func(t *testing.T, e *controllertest.Env, name string) {
			_, err := e.Client.CoreV1().PersistentVolumeClaims(ns).Create(e.Ctx, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: list("storage", "1Gi")}},
			}, metav1.CreateOptions{})
			must(t, err)
		}, func(e *controllertest.Env, name string) error {
			return e.Client.CoreV1().PersistentVolumeClaims(ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, never)
			// Created before the quota, so its first measurement counts
			// them: nothing charges creates here.
			tc.create(t, e, "a")
			tc.create(t, e, "b")
			createQuota(t, e, "q", list(tc.resource, "10"))
			waitUsed(t, e, "q", list(tc.resource, "2"))
			must(t, tc.del(e, "a"))
			waitUsed(t, e, "q", list(tc.resource, "1"))
		})
	}
}

func TestQuota_OtherQuotaDeleted_QuotaCountGivenBack(t *testing.T) {
	e := start(t, never)
	createQuota(t, e, "other", list("pods", "1"))
	createQuota(t, e, "q", list("resourcequotas", "5"))
	waitUsed(t, e, "q", list("resourcequotas", "2"))
	must(t, e.Client.CoreV1().ResourceQuotas(ns).Delete(e.Ctx, "other", metav1.DeleteOptions{}))
	waitUsed(t, e, "q", list("resourcequotas", "1"))
}

func TestQuota_PodRequests_Summed(t *testing.T) {
	e := start(t, never)
	pod(t, e, "a", "100m")
	pod(t, e, "b", "250m")
	createQuota(t, e, "q", list("pods", "5", "requests.cpu", "2", "cpu", "2", "requests.memory", "1Gi"))
	waitUsed(t, e, "q", list("pods", "2", "requests.cpu", "350m", "cpu", "350m", "requests.memory", "128Mi"))
}

func TestQuota_PodSucceeded_ComputeGivenBack(t *testing.T) {
	e := start(t, never)
	pod(t, e, "a", "100m")
	b := pod(t, e, "b", "250m")
	createQuota(t, e, "q", list("pods", "5", "count/pods", "5", "requests.cpu", "2"))
	waitUsed(t, e, "q", list("pods", "2", "count/pods", "2", "requests.cpu", "350m"))
	b.Status.Phase = corev1.PodSucceeded
	_, err := e.Client.CoreV1().Pods(ns).UpdateStatus(e.Ctx, b, metav1.UpdateOptions{})
	must(t, err)
	// A finished pod is still stored (count/pods) but uses nothing.
	waitUsed(t, e, "q", list("pods", "1", "count/pods", "2", "requests.cpu", "100m"))
}

func TestQuota_StatusChangedByHand_Reset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resync time.Duration
		edit   func(*corev1.ResourceQuotaStatus)
	}{
		// A hard that disagrees with spec is put right at once.
		{"hard", never, func(s *corev1.ResourceQuotaStatus) { s.Hard = list("cpu", "2", "memory", "2Gi") }},
		// Used alone is trusted until the full resync.
		{"used", 200 * time.Millisecond, func(s *corev1.ResourceQuotaStatus) { s.Used = list("cpu", "7", "memory", "0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, tc.resync)
			pod(t, e, "a", "100m")
			createQuota(t, e, "q", list("cpu", "1", "memory", "1Gi"))
			waitUsed(t, e, "q", list("cpu", "100m", "memory", "64Mi"))
			q, err := e.Client.CoreV1().ResourceQuotas(ns).Get(e.Ctx, "q", metav1.GetOptions{})
			must(t, err)
			tc.edit(&q.Status)
			edited, err := e.Client.CoreV1().ResourceQuotas(ns).UpdateStatus(e.Ctx, q, metav1.UpdateOptions{})
			must(t, err)
			if quota.Equals(edited.Status.Hard, edited.Spec.Hard) && edited.Status.Used.Cpu().Cmp(resource.MustParse("100m")) == 0 {
				t.Fatalf("the edit did not take: %+v", edited.Status)
			}
			waitUsed(t, e, "q", list("cpu", "100m", "memory", "64Mi"))
		})
	}
}

func TestQuota_ServiceTypeChanged_NodePortsGivenBack(t *testing.T) {
	e := start(t, never)
	svc, err := e.Client.CoreV1().Services(ns).Create(e.Ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "x"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	must(t, err)
	createQuota(t, e, "q", list("services", "5", "services.nodeports", "5"))
	waitUsed(t, e, "q", list("services", "1", "services.nodeports", "1"))
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	svc.Spec.ExternalTrafficPolicy = ""
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].NodePort = 0
	}
	_, err = e.Client.CoreV1().Services(ns).Update(e.Ctx, svc, metav1.UpdateOptions{})
	must(t, err)
	waitUsed(t, e, "q", list("services", "1", "services.nodeports", "0"))
}

func TestQuota_PodDeletingPastGrace_ComputeGivenBack(t *testing.T) {
	e := start(t, never)
	p, err := e.Client.CoreV1().Pods(ns).Create(e.Ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		// On a node, so deleting waits for a kubelet that never comes.
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: list("cpu", "100m")}}}},
	}, metav1.CreateOptions{})
	must(t, err)
	createQuota(t, e, "q", list("pods", "5", "count/pods", "5", "requests.cpu", "1"))
	waitUsed(t, e, "q", list("pods", "1", "count/pods", "1", "requests.cpu", "100m"))
	must(t, e.Client.CoreV1().Pods(ns).Delete(e.Ctx, p.Name, *metav1.NewDeleteOptions(1)))
	got, err := e.Client.CoreV1().Pods(ns).Get(e.Ctx, p.Name, metav1.GetOptions{})
	must(t, err)
	if got.DeletionTimestamp == nil {
		t.Fatal("pod not left deleting")
	}
	// No event marks the end of the grace period; the controller looks
	// again then by itself.
	waitUsed(t, e, "q", list("pods", "0", "count/pods", "1", "requests.cpu", "0"))
}
