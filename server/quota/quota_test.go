package quota

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func withResources(req, lim corev1.ResourceList) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
}

// sameList compares by amount, so 500m and 0.5 agree.
func sameList(t *testing.T, got, want corev1.ResourceList) {
	t.Helper()
	if !Equals(got, want) {
		t.Errorf("got %s, want %s", PrettyPrint(got), PrettyPrint(want))
	}
}

func TestPodUsage_States_ChargeAsUpstream(t *testing.T) {
	r := NewRegistry(func() time.Time { return now })
	podsGR := schema.GroupResource{Resource: "pods"}
	deleting := func(grace int64, ago time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(-ago)}
			p.DeletionGracePeriodSeconds = ptr.To(grace)
		}
	}
	compute := withResources(rl("cpu", "500m", "memory", "252Mi", "ephemeral-storage", "30Gi", "example.com/dongle", "2", "hugepages-2Mi", "4Mi"),
		rl("cpu", "1", "memory", "300Mi", "example.com/dongle", "2"))
	full := rl("count/pods", "1", "pods", "1",
		"cpu", "500m", "requests.cpu", "500m", "limits.cpu", "1",
		"memory", "252Mi", "requests.memory", "252Mi", "limits.memory", "300Mi",
		"ephemeral-storage", "30Gi", "requests.ephemeral-storage", "30Gi",
		"requests.example.com/dongle", "2", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi")
	cases := []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		{"running pod is charged requests, limits and the short names", pod("p", compute), full},
		{"best-effort pod is charged the pod only", pod("p"), rl("count/pods", "1", "pods", "1")},
		{"succeeded pod counts as an object only", pod("p", compute, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), rl("count/pods", "1")},
		{"failed pod counts as an object only", pod("p", compute, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), rl("count/pods", "1")},
		{"pod deleting within its grace period is charged", pod("p", compute, deleting(30, 10*time.Second)), full},
		{"pod deleting past its grace period counts as an object only", pod("p", compute, deleting(30, time.Minute)), rl("count/pods", "1")},
		{"init container larger than the containers sets the requests", pod("p", withResources(rl("cpu", "100m"), nil), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "300m")}}}
		}), rl("count/pods", "1", "pods", "1", "cpu", "300m", "requests.cpu", "300m")},
		{"sidecar adds to the containers", pod("p", withResources(rl("cpu", "100m"), nil), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: rl("cpu", "50m")}}}
		}), rl("count/pods", "1", "pods", "1", "cpu", "150m", "requests.cpu", "150m")},
		{"overhead is added", pod("p", withResources(rl("memory", "100Mi"), nil), func(p *corev1.Pod) { p.Spec.Overhead = rl("memory", "10Mi") }),
			rl("count/pods", "1", "pods", "1", "memory", "110Mi", "requests.memory", "110Mi")},
		{"pending resize is charged the larger of spec and allocated", pod("p", withResources(rl("cpu", "100m"), nil), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", AllocatedResources: rl("cpu", "400m")}}
		}), rl("count/pods", "1", "pods", "1", "cpu", "400m", "requests.cpu", "400m")},
		{"pod-level resources replace the containers'", pod("p", withResources(rl("cpu", "100m"), nil), func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
		}), rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.Usage(podsGR, c.pod)
			if err != nil {
				t.Fatal(err)
			}
			sameList(t, got, c.want)
		})
	}
}

func TestPodScopes_Selectors_MatchAsUpstream(t *testing.T) {
	e := &podEvaluator{now: func() time.Time { return now }}
	sel := func(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: op, Values: values}
	}
	terminating := pod("t", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600) })
	burstable := pod("b", withResources(rl("cpu", "100m"), nil))
	high := pod("h", func(p *corev1.Pod) { p.Spec.PriorityClassName = "pclass1" })
	cross := pod("x", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "k", Namespaces: []string{"other"}}}}}
	})
	plain := pod("p")
	cases := []struct {
		name string
		sel  corev1.ScopedResourceSelectorRequirement
		pod  *corev1.Pod
		want bool
	}{
		{"Terminating has activeDeadlineSeconds", sel(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists), terminating, true},
		{"Terminating excludes a pod without deadline", sel(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists), plain, false},
		{"NotTerminating has no deadline", sel(corev1.ResourceQuotaScopeNotTerminating, corev1.ScopeSelectorOpExists), plain, true},
		{"BestEffort has no cpu or memory", sel(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), plain, true},
		{"BestEffort excludes burstable", sel(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), burstable, false},
		{"NotBestEffort has requests", sel(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists), burstable, true},
		{"PriorityClass In matches the class", sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "pclass1", "pclass2"), high, true},
		{"PriorityClass In misses another class", sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "pclass2"), high, false},
		{"PriorityClass NotIn matches another class", sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "pclass2"), high, true},
		{"PriorityClass NotIn matches a pod without class", sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "pclass2"), plain, true},
		{"PriorityClass Exists needs a class", sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists), plain, false},
		{"PriorityClass DoesNotExist matches no class", sel(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist), plain, true},
		{"CrossNamespacePodAffinity sees namespaces", sel(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists), cross, true},
		{"CrossNamespacePodAffinity excludes plain pods", sel(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists), plain, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := e.MatchesScope(c.sel, c.pod)
			if err != nil || got != c.want {
				t.Errorf("MatchesScope = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	if _, err := e.MatchesScope(sel(corev1.ResourceQuotaScopePriorityClass, "Bogus"), high); err == nil {
		t.Error("an unknown operator must be an error")
	}
}

func TestPodConstraints_MissingCompute_UpstreamMessage(t *testing.T) {
	e := &podEvaluator{now: time.Now}
	p := pod("p", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "1")}},
			{Name: "b"},
		}
	})
	err := e.Constraints([]corev1.ResourceName{"limits.cpu", "requests.memory", "pods"}, p)
	want := "must specify limits.cpu for: b; requests.memory for: a,b"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if err := e.Constraints([]corev1.ResourceName{"requests.ephemeral-storage", "pods"}, p); err != nil {
		t.Errorf("only cpu and memory are constrained, got %v", err)
	}
}

func TestServiceUsage_Types_CountPortsAndBalancers(t *testing.T) {
	svc := func(typ corev1.ServiceType, ports int, allocate *bool) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, AllocateLoadBalancerNodePorts: allocate}}
		for i := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: int32(80 + i)})
		}
		return s
	}
	noAlloc := svc(corev1.ServiceTypeLoadBalancer, 2, ptr.To(false))
	noAlloc.Spec.Ports[0].NodePort = 30001
	cases := []struct {
		name string
		svc  *corev1.Service
		want corev1.ResourceList
	}{
		{"ClusterIP", svc(corev1.ServiceTypeClusterIP, 2, nil), rl("count/services", "1", "services", "1", "services.nodeports", "0", "services.loadbalancers", "0")},
		{"NodePort counts each port", svc(corev1.ServiceTypeNodePort, 2, nil), rl("count/services", "1", "services", "1", "services.nodeports", "2", "services.loadbalancers", "0")},
		{"LoadBalancer counts ports and one balancer", svc(corev1.ServiceTypeLoadBalancer, 3, nil), rl("count/services", "1", "services", "1", "services.nodeports", "3", "services.loadbalancers", "1")},
		{"LoadBalancer without node ports counts only named ones", noAlloc, rl("count/services", "1", "services", "1", "services.nodeports", "1", "services.loadbalancers", "1")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := serviceEvaluator{}.Usage(c.svc)
			if err != nil {
				t.Fatal(err)
			}
			sameList(t, got, c.want)
		})
	}
}

func TestPVCUsage_Classes_ChargeClaimAndStorage(t *testing.T) {
	claim := func(class *string, req string, allocated string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class,
			Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", req)}}}
		if allocated != "" {
			c.Status.AllocatedResources = rl("storage", allocated)
		}
		return c
	}
	cases := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want corev1.ResourceList
	}{
		{"no class", claim(nil, "1Gi", ""), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "1Gi")},
		{"gold class is charged per class too", claim(ptr.To("gold"), "1Gi", ""), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "1Gi",
			"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "gold.storageclass.storage.k8s.io/requests.storage", "1Gi")},
		{"larger allocation is charged", claim(nil, "1Gi", "2Gi"), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "2Gi")},
		{"fractional bytes round up", claim(nil, "1500m", ""), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "2")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := pvcEvaluator{}.Usage(c.pvc)
			if err != nil {
				t.Fatal(err)
			}
			sameList(t, got, c.want)
		})
	}
	names := pvcEvaluator{}.MatchingResources([]corev1.ResourceName{"gold.storageclass.storage.k8s.io/requests.storage", "requests.storage", "pods", "count/persistentvolumeclaims"})
	if len(names) != 3 {
		t.Errorf("MatchingResources = %v, want the per-class, plain and count names", names)
	}
}

func TestPVCScope_VolumeAttributesClass_MatchesNamedClasses(t *testing.T) {
	withVAC := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeAttributesClassName: ptr.To("fast")}}
	without := &corev1.PersistentVolumeClaim{}
	in := corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"fast"}}
	for _, c := range []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want bool
	}{{"named class matches", withVAC, true}, {"no class misses", without, false}} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := (pvcEvaluator{}).MatchesScope(in, c.pvc); err != nil || got != c.want {
				t.Errorf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestMatches_QuotaScopesAndHard_CoverAsUpstream(t *testing.T) {
	r := NewRegistry(nil)
	podsGR := schema.GroupResource{Resource: "pods"}
	q := func(hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}, Status: corev1.ResourceQuotaStatus{Hard: hard}}
	}
	cases := []struct {
		name string
		gr   schema.GroupResource
		q    *corev1.ResourceQuota
		obj  runtime.Object
		want bool
	}{
		{"pod quota covers a pod", podsGR, q(rl("pods", "1")), pod("p"), true},
		{"quota on other resources does not", podsGR, q(rl("secrets", "1")), pod("p"), false},
		{"quota without status does not (not measured yet)", podsGR, &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "1")}}, pod("p"), false},
		{"scoped quota covers matching pods", podsGR, q(rl("pods", "1"), corev1.ResourceQuotaScopeBestEffort), pod("p"), true},
		{"scoped quota skips other pods", podsGR, q(rl("pods", "1"), corev1.ResourceQuotaScopeNotBestEffort), pod("p"), false},
		{"scoped quota covers no configmap", schema.GroupResource{Resource: "configmaps"}, q(rl("configmaps", "1"), corev1.ResourceQuotaScopeBestEffort), &corev1.ConfigMap{}, false},
		{"custom resource count", schema.GroupResource{Group: "example.com", Resource: "widgets"}, q(rl("count/widgets.example.com", "1")), &unstructured.Unstructured{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.Matches(c.gr, c.q, c.obj)
			if err != nil || got != c.want {
				t.Errorf("Matches = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestCountUsage_LegacyAliases_CountBothNames(t *testing.T) {
	r := NewRegistry(nil)
	for res, alias := range legacyCountAliases {
		t.Run(res, func(t *testing.T) {
			got, err := r.Usage(schema.GroupResource{Resource: res}, &corev1.ConfigMap{})
			if err != nil {
				t.Fatal(err)
			}
			sameList(t, got, corev1.ResourceList{CountName(schema.GroupResource{Resource: res}): one, alias: one})
		})
	}
	got, _ := r.Usage(schema.GroupResource{Group: "apps", Resource: "replicasets"}, &unstructured.Unstructured{})
	sameList(t, got, rl("count/replicasets.apps", "1"))
}

func TestStatus_ObjectsInNamespace_MeasuresEveryHardResource(t *testing.T) {
	r := NewRegistry(func() time.Time { return now })
	objs := map[schema.GroupResource][]runtime.Object{
		{Resource: "pods"}: {
			pod("a", withResources(rl("cpu", "100m", "memory", "10Mi"), nil)),
			pod("b", withResources(rl("cpu", "200m"), nil), func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](10) }),
			pod("done", withResources(rl("cpu", "1"), nil), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		},
		{Resource: "services"}:                             {&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 1}}}}},
		{Resource: "configmaps"}:                           {&corev1.ConfigMap{}, &corev1.ConfigMap{}},
		{Group: "example.com", Resource: "widgets"}:        {&unstructured.Unstructured{}},
		{Group: "apps", Resource: "replicasets"}:           {},
		{Resource: "persistentvolumeclaims"}:               {&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")}}}},
		{Group: "gone.example.com", Resource: "gadgets"}:   nil,
		{Group: "broken.example.com", Resource: "things"}:  nil,
		{Resource: "secrets"}:                              {},
		{Resource: "replicationcontrollers"}:               {},
		{Resource: "resourcequotas"}:                       {&corev1.ResourceQuota{}},
		{Group: "unused.example.com", Resource: "unknown"}: nil,
	}
	list := func(_ context.Context, gr schema.GroupResource, ns string) ([]runtime.Object, error) {
		if ns != "ns" {
			return nil, fmt.Errorf("wrong namespace %q", ns)
		}
		switch gr.Group {
		case "gone.example.com":
			return nil, fmt.Errorf("no such resource: %w", ErrNotServed)
		case "broken.example.com":
			return nil, errors.New("store down")
		}
		return objs[gr], nil
	}
	hard := rl("pods", "10", "count/pods", "10", "requests.cpu", "2", "memory", "1Gi", "services", "5", "services.nodeports", "5",
		"configmaps", "5", "count/widgets.example.com", "5", "count/replicasets.apps", "5", "requests.storage", "10Gi",
		"count/gadgets.gone.example.com", "5", "count/things.broken.example.com", "5", "resourcequotas", "1")
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: hard},
		Status: corev1.ResourceQuotaStatus{Used: rl("count/things.broken.example.com", "3", "secrets", "7")}}
	st, err := r.Status(context.Background(), q, list)
	if err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("a failed list must be reported, got %v", err)
	}
	sameList(t, st.Hard, hard)
	sameList(t, st.Used, rl("pods", "2", "count/pods", "3", "requests.cpu", "300m", "memory", "10Mi", "services", "1", "services.nodeports", "1",
		"configmaps", "2", "count/widgets.example.com", "1", "count/replicasets.apps", "0", "requests.storage", "1Gi",
		"count/gadgets.gone.example.com", "0", "count/things.broken.example.com", "3", "resourcequotas", "1"))

	q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}
	q.Spec.Hard = rl("pods", "10", "requests.cpu", "2", "configmaps", "5")
	st, err = r.Status(context.Background(), q, list)
	if err != nil {
		t.Fatal(err)
	}
	sameList(t, st.Used, rl("pods", "1", "requests.cpu", "200m", "configmaps", "0"))
}
