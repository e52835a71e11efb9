package admission

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
)

func newAllocator(t *testing.T, cidr string, portMin, portMax int) *ServiceAllocator {
	t.Helper()
	srv := apitest.Start(t, apitest.Options{})
	_, n, _ := net.ParseCIDR(cidr)
	return &ServiceAllocator{Store: srv.Store, Objects: srv.Storage, Registry: srv.Registry, CIDR: n, NodePortMin: portMin, NodePortMax: portMax}
}

func svc(name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

func create(p *ServiceAllocator, s *corev1.Service) error {
	return p.Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: s})
}

func TestServiceAllocator_ConcurrentCreates_NeverShareAnAddressOrPort(t *testing.T) {
	// A /27 has 29 usable service addresses; 29 node ports.
	p := newAllocator(t, "10.96.0.0/27", 30000, 30028)
	var wg sync.WaitGroup
	svcs := make([]*corev1.Service, 29)
	errs := make([]error, 29)
	for i := range svcs {
		svcs[i] = svc(fmt.Sprint("s", i), corev1.ServiceTypeNodePort)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = create(p, svcs[i])
		}()
	}
	wg.Wait()
	ips, ports := map[string]bool{}, map[int32]bool{}
	for i, s := range svcs {
		if errs[i] != nil {
			t.Fatalf("service %d: %v", i, errs[i])
		}
		if ips[s.Spec.ClusterIP] || ports[s.Spec.Ports[0].NodePort] {
			t.Fatalf("duplicate allocation: %s %d", s.Spec.ClusterIP, s.Spec.Ports[0].NodePort)
		}
		ips[s.Spec.ClusterIP], ports[s.Spec.Ports[0].NodePort] = true, true
	}
	if err := create(p, svc("full", corev1.ServiceTypeClusterIP)); err == nil {
		t.Fatal("a full range still allocated an address")
	}
	// Releasing one service frees exactly its address for the next.
	p.Release(context.Background(), nil, svcs[3], nil)
	next := svc("next", corev1.ServiceTypeClusterIP)
	if err := create(p, next); err != nil || next.Spec.ClusterIP != svcs[3].Spec.ClusterIP {
		t.Fatalf("after release: %v, got %s want %s", err, next.Spec.ClusterIP, svcs[3].Spec.ClusterIP)
	}
}

func TestServiceAllocator_RequestedAddressesAndPorts(t *testing.T) {
	p := newAllocator(t, "10.43.0.0/16", 30000, 32767)
	a := svc("a", corev1.ServiceTypeNodePort)
	a.Spec.ClusterIP, a.Spec.Ports[0].NodePort = "10.43.7.7", 30080
	if err := create(p, a); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mod  func(*corev1.Service)
	}{
		{"same address", func(s *corev1.Service) { s.Spec.ClusterIP = "10.43.7.7" }},
		{"address outside the range", func(s *corev1.Service) { s.Spec.ClusterIP = "10.99.0.1" }},
		{"same node port", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 30080 }},
		{"node port outside the range", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 80 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := svc("b", corev1.ServiceTypeClusterIP)
			c.mod(b)
			if err := create(p, b); !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want a 422 Invalid", err)
			}
		})
	}
	lb := svc("lb", corev1.ServiceTypeLoadBalancer)
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if err := create(p, lb); err != nil || lb.Spec.HealthCheckNodePort == 0 || lb.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("LoadBalancer with Local traffic: %v, %+v", err, lb.Spec)
	}
}
