package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/quota"
	"skiff/server/registry"
)

// fakeQuotas is an in-memory store of quotas with compare-and-swap status
// writes and a global revision, like the real store.
type fakeQuotas struct {
	mu     sync.Mutex
	rev    int64
	quotas map[string]*corev1.ResourceQuota
	// stale, when set, is what List returns instead (a lagging cache).
	stale  []*corev1.ResourceQuota
	writes int
	// onList and onUpdate, when set, run before the n-th (from 1) List and
	// UpdateStatus, outside the lock: tests block or race a call there.
	onList, onUpdate func(n int)
	lists, updates   int
}

func newFake(qs ...*corev1.ResourceQuota) *fakeQuotas {
	f := &fakeQuotas{quotas: map[string]*corev1.ResourceQuota{}}
	for _, q := range qs {
		f.put(q)
	}
	return f
}

func (f *fakeQuotas) put(q *corev1.ResourceQuota) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	q = q.DeepCopy()
	q.ResourceVersion = strconv.FormatInt(f.rev, 10)
	if q.UID == "" {
		q.UID = types.UID("uid-" + q.Name)
	}
	f.quotas[q.Name] = q
}

func (f *fakeQuotas) get(name string) *corev1.ResourceQuota {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.quotas[name].DeepCopy()
}

func (f *fakeQuotas) List(ctx context.Context, ns string) ([]*corev1.ResourceQuota, error) {
	f.mu.Lock()
	f.lists++
	n, hook := f.lists, f.onList
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stale != nil {
		return f.stale, nil
	}
	var out []*corev1.ResourceQuota
	for _, q := range f.quotas {
		if q.Namespace == ns {
			out = append(out, q.DeepCopy())
		}
	}
	return out, nil
}

func (f *fakeQuotas) UpdateStatus(ctx context.Context, q *corev1.ResourceQuota, expected string) (*corev1.ResourceQuota, error) {
	f.mu.Lock()
	f.updates++
	n, hook := f.updates, f.onUpdate
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.quotas[q.Name]
	if cur == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "resourcequotas"}, q.Name)
	}
	if cur.ResourceVersion != expected {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, q.Name, errors.New("the object has been modified"))
	}
	f.rev++
	f.writes++
	next := cur.DeepCopy()
	next.Status = *q.Status.DeepCopy()
	next.ResourceVersion = strconv.FormatInt(f.rev, 10)
	f.quotas[q.Name] = next
	return next.DeepCopy(), nil
}

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// measured is a quota as the controller leaves it: status.hard = spec.hard.
func measured(name string, hard, used corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

var (
	podsRes     = &registry.Resource{Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true}
	servicesRes = &registry.Resource{Version: "v1", Name: "services", Kind: "Service", Namespaced: true}
	pvcRes      = &registry.Resource{Version: "v1", Name: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", Namespaced: true}
	widgetsRes  = &registry.Resource{Group: "example.com", Version: "v1", Name: "widgets", Kind: "Widget", Namespaced: true}
)

func newPod(name string, req, lim corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("pod-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}},
	}
}

func create(res *registry.Resource, obj runtime.Object) apiserver.AdmissionAttributes {
	return apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: res, Object: obj}
}

func plugin(f *fakeQuotas) *Plugin { return &Plugin{Quotas: f, Evaluators: quota.NewRegistry(nil)} }

func TestAdmit_Create_RefusesAsUpstream(t *testing.T) {
	cpuQuota := measured("compute", rl("requests.cpu", "1", "limits.cpu", "2", "pods", "10"), rl("requests.cpu", "800m", "limits.cpu", "1", "pods", "1"))
	cases := []struct {
		name   string
		quotas []*corev1.ResourceQuota
		a      apiserver.AdmissionAttributes
		want   string // "" admits
	}{
		{"pods quota full", []*corev1.ResourceQuota{measured("q", rl("pods", "1"), rl("pods", "1"))},
			create(podsRes, newPod("p", nil, nil)),
			`pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1`},
		{"pods quota with room", []*corev1.ResourceQuota{measured("q", rl("pods", "2"), rl("pods", "1"))},
			create(podsRes, newPod("p", nil, nil)), ""},
		{"cpu request over what is left", []*corev1.ResourceQuota{cpuQuota},
			create(podsRes, newPod("p", rl("cpu", "300m"), rl("cpu", "500m"))),
			`pods "p" is forbidden: exceeded quota: compute, requested: requests.cpu=300m, used: requests.cpu=800m, limited: requests.cpu=1`},
		{"container without limits under a limits quota", []*corev1.ResourceQuota{cpuQuota},
			create(podsRes, newPod("p", rl("cpu", "100m"), nil)),
			`pods "p" is forbidden: failed quota: compute: must specify limits.cpu for: c`},
		{"extended resource over quota", []*corev1.ResourceQuota{measured("q", rl("requests.example.com/dongle", "3"), rl("requests.example.com/dongle", "2"))},
			create(podsRes, newPod("p", rl("example.com/dongle", "2"), rl("example.com/dongle", "2"))),
			`pods "p" is forbidden: exceeded quota: q, requested: requests.example.com/dongle=2, used: requests.example.com/dongle=2, limited: requests.example.com/dongle=3`},
		{"quota without usage for a hard resource", []*corev1.ResourceQuota{measured("q", rl("pods", "5", "requests.memory", "1Gi"), rl("pods", "0"))},
			create(podsRes, newPod("p", rl("memory", "1Mi"), nil)),
			`pods "p" is forbidden: status unknown for quota: q, resources: pods,requests.memory`},
		{"quota not yet measured is not enforced, as upstream", []*corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "0")}}},
			create(podsRes, newPod("p", nil, nil)), ""},
		{"scoped quota ignores pods outside its scope", []*corev1.ResourceQuota{measured("q", rl("pods", "0"), rl("pods", "0"), corev1.ResourceQuotaScopeNotBestEffort)},
			create(podsRes, newPod("p", nil, nil)), ""},
		{"scoped quota refuses pods in its scope", []*corev1.ResourceQuota{measured("q", rl("pods", "0"), rl("pods", "0"), corev1.ResourceQuotaScopeBestEffort)},
			create(podsRes, newPod("p", nil, nil)),
			`pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=0, limited: pods=0`},
		{"node ports", []*corev1.ResourceQuota{measured("q", rl("services", "10", "services.nodeports", "1"), rl("services", "0", "services.nodeports", "1"))},
			create(servicesRes, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}),
			`services "s" is forbidden: exceeded quota: q, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1`},
		{"storage class claims", []*corev1.ResourceQuota{measured("q", rl("gold.storageclass.storage.k8s.io/requests.storage", "1Gi"), rl("gold.storageclass.storage.k8s.io/requests.storage", "0"))},
			create(pvcRes, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("gold"), Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "2Gi")}}}),
			`persistentvolumeclaims "c" is forbidden: exceeded quota: q, requested: gold.storageclass.storage.k8s.io/requests.storage=2Gi, used: gold.storageclass.storage.k8s.io/requests.storage=0, limited: gold.storageclass.storage.k8s.io/requests.storage=1Gi`},
		{"custom resource count", []*corev1.ResourceQuota{measured("q", rl("count/widgets.example.com", "1"), rl("count/widgets.example.com", "1"))},
			create(widgetsRes, widget("w")),
			`widgets.example.com "w" is forbidden: exceeded quota: q, requested: count/widgets.example.com=1, used: count/widgets.example.com=1, limited: count/widgets.example.com=1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c.quotas...)
			err := plugin(f).Admit(context.Background(), c.a)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || err.Error() != c.want {
				t.Fatalf("got %v (forbidden %v)\nwant %s", err, apierrors.IsForbidden(err), c.want)
			}
			for _, q := range c.quotas {
				if got := f.get(q.Name); !quota.Equals(got.Status.Used, q.Status.Used) {
					t.Errorf("a refused request changed %s used to %s", q.Name, quota.PrettyPrint(got.Status.Used))
				}
			}
		})
	}
}

func TestAdmit_Admitted_ChargesEveryCoveringQuota(t *testing.T) {
	f := newFake(
		measured("all", rl("pods", "10", "requests.cpu", "4"), rl("pods", "1", "requests.cpu", "1")),
		measured("besteffort", rl("pods", "10"), rl("pods", "0"), corev1.ResourceQuotaScopeBestEffort),
		measured("secrets", rl("secrets", "10"), rl("secrets", "0")),
	)
	if err := plugin(f).Admit(context.Background(), create(podsRes, newPod("p", rl("cpu", "500m"), nil))); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]corev1.ResourceList{
		"all":        rl("pods", "2", "requests.cpu", "1500m"),
		"besteffort": rl("pods", "0"),
		"secrets":    rl("secrets", "0"),
	} {
		if got := f.get(name).Status.Used; !quota.Equals(got, want) {
			t.Errorf("%s used %s, want %s", name, quota.PrettyPrint(got), quota.PrettyPrint(want))
		}
	}
}

func TestAdmit_DryRun_ChargesNothing(t *testing.T) {
	f := newFake(measured("q", rl("pods", "1"), rl("pods", "0")))
	a := create(podsRes, newPod("p", nil, nil))
	a.DryRun = true
	if err := plugin(f).Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if f.writes != 0 {
		t.Errorf("dry run wrote %d times", f.writes)
	}
}

func TestAdmit_Update_ChargesOnlyGrowth(t *testing.T) {
	claim := func(size, rv string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: rv},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", size)}}}
	}
	cases := []struct {
		name     string
		old, obj *corev1.PersistentVolumeClaim
		want     string // used after, or the error
	}{
		{"expansion within quota is charged the difference", claim("1Gi", "5"), claim("3Gi", "5"), "requests.storage=4Gi"},
		{"expansion beyond quota is refused", claim("1Gi", "5"), claim("10Gi", "5"),
			`persistentvolumeclaims "c" is forbidden: exceeded quota: q, requested: requests.storage=9Gi, used: requests.storage=2Gi, limited: requests.storage=5Gi`},
		{"an update that does not grow charges nothing", claim("1Gi", "5"), claim("1Gi", "5"), "requests.storage=2Gi"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(measured("q", rl("requests.storage", "5Gi"), rl("requests.storage", "2Gi")))
			err := plugin(f).Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pvcRes, Object: c.obj, Old: c.old})
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = quota.PrettyPrint(f.get("q").Status.Used)
			}
			if got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestAdmit_PodResize_ChargedAndRefused(t *testing.T) {
	f := newFake(measured("q", rl("requests.cpu", "1"), rl("requests.cpu", "500m")))
	old := newPod("p", rl("cpu", "500m"), nil)
	old.ResourceVersion = "3"
	bigger := newPod("p", rl("cpu", "2"), nil)
	bigger.ResourceVersion = "3"
	err := plugin(f).Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: podsRes, Subresource: "resize", Object: bigger, Old: old})
	want := `pods "p" is forbidden: exceeded quota: q, requested: requests.cpu=1500m, used: requests.cpu=500m, limited: requests.cpu=1`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	// A plain update of a pod's spec is not quota's to judge (validation
	// refuses it).
	if err := plugin(f).Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: podsRes, Object: bigger, Old: old}); err != nil {
		t.Fatalf("plain update: %v", err)
	}
}

// Twenty creates at once against pods=5: exactly five get in, the quota
// ends at its limit, and every refusal is upstream's message.
func TestAdmit_ConcurrentCreates_NeverOvershoot(t *testing.T) {
	f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
	p := plugin(f)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			errs[i] = p.Admit(context.Background(), create(podsRes, newPod(fmt.Sprintf("p%d", i), nil, nil)))
		})
	}
	wg.Wait()
	admitted := 0
	for _, err := range errs {
		switch {
		case err == nil:
			admitted++
		case !apierrors.IsForbidden(err):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if admitted != 5 {
		t.Errorf("admitted %d, want 5", admitted)
	}
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "5")) {
		t.Errorf("used %s, want pods=5", quota.PrettyPrint(got))
	}
}

// Two servers (two plugins) sharing one store race through the CAS: the
// loser re-reads and re-checks.
func TestAdmit_TwoServersRacing_NeverOvershoot(t *testing.T) {
	f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
	servers := []*Plugin{plugin(f), plugin(f)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := range 20 {
		wg.Go(func() {
			if err := servers[i%2].Admit(context.Background(), create(podsRes, newPod(fmt.Sprintf("p%d", i), nil, nil))); err == nil {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	used := f.get("q").Status.Used[corev1.ResourcePods]
	if admitted > 5 || used.Value() != int64(admitted) {
		t.Errorf("admitted %d with used pods=%s: quota overshot or miscounted", admitted, used.String())
	}
}

// A lagging List must not make the plugin charge against an old used.
func TestAdmit_StaleList_UsesOwnNewerCopy(t *testing.T) {
	f := newFake(measured("q", rl("pods", "2"), rl("pods", "0")))
	p := plugin(f)
	f.stale, _ = f.List(context.Background(), "ns")
	for i := range 3 {
		err := p.Admit(context.Background(), create(podsRes, newPod(fmt.Sprintf("p%d", i), nil, nil)))
		if (err == nil) != (i < 2) {
			t.Fatalf("create %d: %v", i, err)
		}
	}
}

func TestRelease_FailedWrite_GivesBackCharge(t *testing.T) {
	f := newFake(measured("q", rl("pods", "1"), rl("pods", "0")))
	p := plugin(f)
	obj := newPod("p", nil, nil)
	if err := p.Admit(context.Background(), create(podsRes, obj)); err != nil {
		t.Fatal(err)
	}
	p.Release(context.Background(), podsRes, obj, nil)
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "0")) {
		t.Fatalf("after release used %s, want pods=0", quota.PrettyPrint(got))
	}
	if err := p.Admit(context.Background(), create(podsRes, newPod("p2", nil, nil))); err != nil {
		t.Errorf("the released room must be usable: %v", err)
	}
	// Releasing twice, or an object never charged, gives nothing back.
	p.Release(context.Background(), podsRes, obj, nil)
	p.Release(context.Background(), podsRes, newPod("other", nil, nil), nil)
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "1")) {
		t.Errorf("used %s, want pods=1", quota.PrettyPrint(got))
	}
}

func TestRelease_SuccessfulUpdate_KeepsCharge(t *testing.T) {
	f := newFake(measured("q", rl("requests.storage", "5Gi"), rl("requests.storage", "1Gi")))
	p := plugin(f)
	old := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: "2"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")}}}
	obj := old.DeepCopy()
	obj.Spec.Resources.Requests = rl("storage", "2Gi")
	if err := p.Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: pvcRes, Object: obj, Old: old}); err != nil {
		t.Fatal(err)
	}
	p.Release(context.Background(), pvcRes, old, obj) // the write happened
	p.Release(context.Background(), pvcRes, obj, nil) // later: nothing held any more
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("requests.storage", "2Gi")) {
		t.Errorf("used %s, want requests.storage=2Gi", quota.PrettyPrint(got))
	}
}

// After the controller rewrote the quota, a charge may already be gone
// from used: giving it back could undercount, so it is left to the
// controller.
func TestRelease_AfterForeignWrite_LeavesUsedAlone(t *testing.T) {
	f := newFake(measured("q", rl("pods", "5"), rl("pods", "0")))
	p := plugin(f)
	obj := newPod("p", nil, nil)
	if err := p.Admit(context.Background(), create(podsRes, obj)); err != nil {
		t.Fatal(err)
	}
	recalculated := f.get("q")
	recalculated.Status.Used = rl("pods", "0")
	if _, err := f.UpdateStatus(context.Background(), recalculated, recalculated.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	p.Release(context.Background(), podsRes, obj, nil)
	if got := f.get("q").Status.Used; !quota.Equals(got, rl("pods", "0")) {
		t.Errorf("used %s, want the controller's pods=0", quota.PrettyPrint(got))
	}
}

func widget(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetName(name)
	u.SetNamespace("ns")
	return u
}
