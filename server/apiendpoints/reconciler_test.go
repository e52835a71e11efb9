package apiendpoints

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func record(name, addr string, renewed time.Time, ttl int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseNamePrefix + name, Namespace: LeaseNamespace,
			Labels: map[string]string{LabelEndpoint: "true"}, Annotations: map[string]string{AnnotationAddress: addr}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(ttl), RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

func newReconciler(t *testing.T, cs kubernetes.Interface, id, ip string, now *time.Time) *Reconciler {
	t.Helper()
	r, err := New(Config{Client: cs, Identity: id, IP: net.ParseIP(ip), Port: 6443, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func endpointIPs(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	eps, err := cs.CoreV1().Endpoints("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, ss := range eps.Subsets {
		for _, a := range ss.Addresses {
			ips = append(ips, a.IP)
		}
	}
	return ips
}

func sliceIPs(t *testing.T, cs kubernetes.Interface, name string) []string {
	t.Helper()
	s, err := cs.DiscoveryV1().EndpointSlices("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, e := range s.Endpoints {
		ips = append(ips, e.Addresses...)
	}
	return ips
}

func TestReconcile_ListsFreshRecordsOnly(t *testing.T) {
	now := t0
	cs := fake.NewClientset(
		record("b", "10.0.0.2:6443", t0.Add(-5*time.Second), 15),  // fresh
		record("c", "10.0.0.3:6443", t0.Add(-20*time.Second), 15), // expired, kept
		record("d", "10.0.0.4:6443", t0.Add(-2*time.Hour), 15),    // expired long ago: deleted
		record("e", "not-an-address", t0, 15),                     // ignored
		record("f", "10.0.0.1:6443", t0.Add(-time.Second), 15),    // same address as self: once
	)
	r := newReconciler(t, cs, "a", "10.0.0.1", &now)
	if err := r.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1", "10.0.0.2"}
	if got := endpointIPs(t, cs); !slices.Equal(got, want) {
		t.Errorf("endpoints = %v, want %v", got, want)
	}
	if got := sliceIPs(t, cs, "kubernetes"); !slices.Equal(got, want) {
		t.Errorf("slice = %v, want %v", got, want)
	}
	leases := cs.CoordinationV1().Leases(LeaseNamespace)
	if _, err := leases.Get(context.Background(), LeaseNamePrefix+"d", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("record d expired 2h ago: get = %v, want NotFound", err)
	}
	if _, err := leases.Get(context.Background(), LeaseNamePrefix+"c", metav1.GetOptions{}); err != nil {
		t.Errorf("record c expired 20s ago should be kept: %v", err)
	}
	self, err := leases.Get(context.Background(), LeaseNamePrefix+"a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := self.Annotations[AnnotationAddress]; got != "10.0.0.1:6443" {
		t.Errorf("own record address = %q", got)
	}
	if !self.Spec.RenewTime.Time.Equal(t0) || *self.Spec.LeaseDurationSeconds != 15 {
		t.Errorf("own record renew=%v ttl=%d", self.Spec.RenewTime, *self.Spec.LeaseDurationSeconds)
	}
}

func TestReconcile_TwoServersSeeEachOtherAndExpire(t *testing.T) {
	now := t0
	cs := fake.NewClientset()
	a := newReconciler(t, cs, "a", "10.0.0.1", &now)
	b := newReconciler(t, cs, "b", "10.0.0.2", &now)
	ctx := context.Background()
	for _, r := range []*Reconciler{a, b} {
		if err := r.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := endpointIPs(t, cs), []string{"10.0.0.1", "10.0.0.2"}; !slices.Equal(got, want) {
		t.Fatalf("endpoints = %v, want %v", got, want)
	}
	// b stops renewing; 16 s later a drops it.
	now = t0.Add(16 * time.Second)
	if err := a.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := endpointIPs(t, cs), []string{"10.0.0.1"}; !slices.Equal(got, want) {
		t.Errorf("after b expired: endpoints = %v, want %v", got, want)
	}
}

func TestRun_OnShutdown_RemovesSelfButNotTheLast(t *testing.T) {
	now := t0
	cs := fake.NewClientset()
	a := newReconciler(t, cs, "a", "10.0.0.1", &now)
	b := newReconciler(t, cs, "b", "10.0.0.2", &now)
	ctx := context.Background()
	for _, r := range []*Reconciler{a, b} {
		if err := r.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop := func(r *Reconciler) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		if err := r.Run(c); err != nil {
			t.Fatal(err)
		}
	}
	stop(b)
	if got, want := endpointIPs(t, cs), []string{"10.0.0.1"}; !slices.Equal(got, want) {
		t.Errorf("after b left: endpoints = %v, want %v", got, want)
	}
	stop(a)
	if got, want := endpointIPs(t, cs), []string{"10.0.0.1"}; !slices.Equal(got, want) {
		t.Errorf("the last server leaves the endpoints: got %v, want %v", got, want)
	}
}

func TestReconcile_MixedFamiliesAndPorts_OneSlicePerGroup(t *testing.T) {
	now := t0
	cs := fake.NewClientset(
		record("b", "[fd00::2]:6443", t0, 15),
		record("c", "10.0.0.3:7443", t0, 15),
	)
	r := newReconciler(t, cs, "a", "10.0.0.1", &now)
	if err := r.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	eps, _ := cs.CoreV1().Endpoints("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if len(eps.Subsets) != 2 || eps.Subsets[0].Ports[0].Port != 6443 || eps.Subsets[1].Ports[0].Port != 7443 {
		t.Errorf("subsets = %+v, want one per port, 6443 first", eps.Subsets)
	}
	if got := sliceIPs(t, cs, "kubernetes"); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("slice kubernetes = %v", got)
	}
	if got := sliceIPs(t, cs, "kubernetes-ipv4-7443"); !slices.Equal(got, []string{"10.0.0.3"}) {
		t.Errorf("slice kubernetes-ipv4-7443 = %v", got)
	}
	if got := sliceIPs(t, cs, "kubernetes-ipv6-6443"); !slices.Equal(got, []string{"fd00::2"}) {
		t.Errorf("slice kubernetes-ipv6-6443 = %v", got)
	}
	// c and b go away: their slices are removed.
	now = t0.Add(time.Minute)
	if err := r.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	list, _ := cs.DiscoveryV1().EndpointSlices("default").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 || list.Items[0].Name != "kubernetes" {
		t.Errorf("slices after the others expired: %d", len(list.Items))
	}
}

func TestReconcile_ExistingUnmarkedObjects_AreTakenOver(t *testing.T) {
	now := t0
	cs := fake.NewClientset(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.9"}}}}})
	r := newReconciler(t, cs, "a", "10.0.0.1", &now)
	if err := r.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := endpointIPs(t, cs); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("endpoints = %v", got)
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	cs := fake.NewClientset()
	for name, cfg := range map[string]Config{
		"no client":     {Identity: "a", IP: net.ParseIP("10.0.0.1"), Port: 6443},
		"no identity":   {Client: cs, IP: net.ParseIP("10.0.0.1"), Port: 6443},
		"bad identity":  {Client: cs, Identity: "A_B", IP: net.ParseIP("10.0.0.1"), Port: 6443},
		"unspecified":   {Client: cs, Identity: "a", IP: net.ParseIP("0.0.0.0"), Port: 6443},
		"port":          {Client: cs, Identity: "a", IP: net.ParseIP("10.0.0.1"), Port: 0},
		"ttl too short": {Client: cs, Identity: "a", IP: net.ParseIP("10.0.0.1"), Port: 6443, Interval: 10 * time.Second, TTL: 5 * time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
