package admission

import (
	"context"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/registry"
	"skiff/store"
)

// apiEnv is an API server with the allocator as its admission, prepared
// as the server prepares it at start.
type apiEnv struct {
	alloc  *ServiceAllocator
	srv    *apitest.Server
	client kubernetes.Interface
}

// clientLister lists Services through the API, for Prepare and Repair.
type clientLister struct{ c kubernetes.Interface }

func (l clientLister) Services(ctx context.Context) ([]*corev1.Service, error) {
	list, err := l.c.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Service, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func startAPI(t *testing.T, cidr string) *apiEnv {
	t.Helper()
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	alloc := &ServiceAllocator{CIDR: n, NodePortMin: 30000, NodePortMax: 32767}
	srv := apitest.Start(t, apitest.Options{Admission: func(st store.Store) []apiserver.Admitter {
		alloc.Store = st
		return []apiserver.Admitter{alloc}
	}})
	alloc.Objects, alloc.Registry = srv.Storage, srv.Registry
	client := kubernetes.NewForConfigOrDie(srv.Config(nil))
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := alloc.Prepare(ctx, clientLister{client}); err != nil {
		t.Fatal(err)
	}
	return &apiEnv{alloc: alloc, srv: srv, client: client}
}

func (e *apiEnv) createService(t *testing.T, s *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := e.client.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", s.Name, err)
	}
	return out
}

func (e *apiEnv) ipAddress(t *testing.T, name string) (*networkingv1.IPAddress, bool) {
	t.Helper()
	ip, err := e.client.NetworkingV1().IPAddresses().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return ip, true
}

func apiService(name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
}

func TestPrepare_FreshStore_DefaultServiceCIDRIsReadyAndProtected(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	c, err := e.client.NetworkingV1().ServiceCIDRs().Get(context.Background(), DefaultServiceCIDR, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Spec.CIDRs) != 1 || c.Spec.CIDRs[0] != "10.43.0.0/16" {
		t.Errorf("cidrs = %v, want [10.43.0.0/16]", c.Spec.CIDRs)
	}
	if !meta.IsStatusConditionTrue(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		t.Errorf("conditions = %+v, want Ready=True", c.Status.Conditions)
	}
	if len(c.Finalizers) != 1 || c.Finalizers[0] != ServiceCIDRFinalizer {
		t.Errorf("finalizers = %v", c.Finalizers)
	}
	// As the conformance test reads it: through the status subresource.
	var st networkingv1.ServiceCIDR
	if err := e.client.NetworkingV1().RESTClient().Get().Resource("servicecidrs").Name(DefaultServiceCIDR).SubResource("status").
		Do(context.Background()).Into(&st); err != nil || st.UID != c.UID {
		t.Errorf("GET status: %v, uid %s want %s", err, st.UID, c.UID)
	}
}

func TestServiceAddress_CreateAndDelete_IPAddressFollowsTheService(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	s := e.createService(t, apiService("web", corev1.ServiceTypeClusterIP))
	rec, ok := e.ipAddress(t, s.Spec.ClusterIP)
	if !ok {
		t.Fatalf("no IPAddress for %s", s.Spec.ClusterIP)
	}
	want := networkingv1.ParentReference{Group: "", Resource: "services", Namespace: "default", Name: "web"}
	if rec.Spec.ParentRef == nil || *rec.Spec.ParentRef != want {
		t.Errorf("parentRef = %+v, want %+v", rec.Spec.ParentRef, want)
	}
	if rec.Labels[networkingv1.LabelManagedBy] != ManagedByAllocator || rec.Labels[networkingv1.LabelIPAddressFamily] != "IPv4" {
		t.Errorf("labels = %v", rec.Labels)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.ipAddress(t, s.Spec.ClusterIP); ok {
		t.Errorf("IPAddress %s outlived its Service", s.Spec.ClusterIP)
	}
}

func TestServiceAddress_DryRunCreate_RecordsNothing(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	s := apiService("web", corev1.ServiceTypeClusterIP)
	s.Spec.ClusterIP = "10.43.9.9"
	if _, err := e.client.CoreV1().Services("default").Create(context.Background(), s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.ipAddress(t, "10.43.9.9"); ok {
		t.Error("a dry run recorded an address")
	}
}

func TestServiceAddress_HeldByHand_IsNotHandedOutNorFreed(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	ctx := context.Background()
	hand := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.5.5"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "example.com", Resource: "things", Name: "a"}}}
	if _, err := e.client.NetworkingV1().IPAddresses().Create(ctx, hand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := apiService("web", corev1.ServiceTypeClusterIP)
	s.Spec.ClusterIP = "10.43.5.5"
	_, err := e.client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create with a reserved address: %v, want Invalid", err)
	}
	if rec, ok := e.ipAddress(t, "10.43.5.5"); !ok || rec.Spec.ParentRef.Resource != "things" {
		t.Errorf("the hand-made IPAddress was lost or changed: %+v", rec)
	}
}

func TestServiceAddress_FailedCreateOfATakenName_KeepsTheHoldersAddress(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	s := e.createService(t, apiService("web", corev1.ServiceTypeClusterIP))
	again := apiService("web", corev1.ServiceTypeClusterIP)
	again.Spec.ClusterIP = s.Spec.ClusterIP
	if _, err := e.client.CoreV1().Services("default").Create(context.Background(), again, metav1.CreateOptions{}); err == nil {
		t.Fatal("a second Service of the same name was created")
	}
	if _, ok := e.ipAddress(t, s.Spec.ClusterIP); !ok {
		t.Error("the failed create freed the existing Service's address")
	}
}

func TestServiceCIDR_NewRange_ServesAddressesOnceReady(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	ctx := context.Background()
	s := apiService("web", corev1.ServiceTypeClusterIP)
	s.Spec.ClusterIP = "203.0.113.10"
	if _, err := e.client.CoreV1().Services("default").Create(ctx, s.DeepCopy(), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("address outside every range: %v, want Invalid", err)
	}
	c, err := e.client.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"203.0.113.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Services("default").Create(ctx, s.DeepCopy(), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("address of a range not yet ready: %v, want Invalid", err)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue, Reason: "Test"})
	if _, err := e.client.NetworkingV1().ServiceCIDRs().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Storage.Cache().WaitCurrent(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.createService(t, s)
	if got.Spec.ClusterIP != "203.0.113.10" {
		t.Errorf("clusterIP = %s", got.Spec.ClusterIP)
	}
	if _, ok := e.ipAddress(t, "203.0.113.10"); !ok {
		t.Error("no IPAddress for the address of the new range")
	}
}

func TestPrepare_StoreFromBeforeIPAddresses_RecordsEveryServiceAddress(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	ctx := context.Background()
	s := e.createService(t, apiService("web", corev1.ServiceTypeClusterIP))
	// As a data dir from before IPAddress objects: the address held by an
	// old allocation key and no IPAddress. (The key first: the watch cache
	// only moves on with writes under /registry/.)
	if _, err := e.srv.Store.Create(ctx, legacyIPPrefix+s.Spec.ClusterIP, []byte(s.UID)); err != nil {
		t.Fatal(err)
	}
	if err := e.client.NetworkingV1().IPAddresses().Delete(ctx, s.Spec.ClusterIP, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.alloc.Prepare(ctx, clientLister{e.client}); err != nil {
		t.Fatal(err)
	}
	rec, ok := e.ipAddress(t, s.Spec.ClusterIP)
	if !ok || !heldBy(rec, s) {
		t.Fatalf("address not recorded for its Service: %+v", rec)
	}
	if _, err := e.srv.Store.Get(ctx, legacyIPPrefix+s.Spec.ClusterIP); err == nil {
		t.Error("the old allocation key is still there")
	}
}

func TestRepair_OrphanAndMissingRecords_FixedOnTheSecondLook(t *testing.T) {
	e := startAPI(t, "10.43.0.0/16")
	ctx := context.Background()
	s := e.createService(t, apiService("web", corev1.ServiceTypeClusterIP))
	if err := e.client.NetworkingV1().IPAddresses().Delete(ctx, s.Spec.ClusterIP, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := apiService("gone", corev1.ServiceTypeClusterIP)
	gone.Namespace, gone.UID = "default", "uid-gone"
	if _, err := e.srv.Storage.Create(ctx, mustResource(t, e, "ipaddresses"), newIPAddress(net.ParseIP("10.43.1.1"), gone)); err != nil {
		t.Fatal(err)
	}
	hand := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.2.2"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "nobody"}}}
	if _, err := e.client.NetworkingV1().IPAddresses().Create(ctx, hand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	suspects := map[string]int64{}
	for round := 1; round <= 2; round++ {
		if err := e.srv.Storage.Cache().WaitCurrent(ctx); err != nil {
			t.Fatal(err)
		}
		next, err := e.alloc.repairOnce(ctx, clientLister{e.client}, suspects)
		if err != nil {
			t.Fatal(err)
		}
		suspects = next
		_, recorded := e.ipAddress(t, s.Spec.ClusterIP)
		_, orphan := e.ipAddress(t, "10.43.1.1")
		if round == 1 && (recorded || !orphan) {
			t.Fatalf("first look changed something: recorded %v, orphan kept %v", recorded, orphan)
		}
		if round == 2 && (!recorded || orphan) {
			t.Fatalf("second look: recorded %v (want true), orphan kept %v (want false)", recorded, orphan)
		}
	}
	if _, ok := e.ipAddress(t, "10.43.2.2"); !ok {
		t.Error("repair deleted an IPAddress the allocator did not make")
	}
}

func mustResource(t *testing.T, e *apiEnv, name string) *registry.Resource {
	t.Helper()
	res, err := e.alloc.resource(name)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
