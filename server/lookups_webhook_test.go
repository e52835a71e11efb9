package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/server/webhook"
	"skiff/store/sqlite"
)

var _ webhook.Resolver = (*objectLookups)(nil)

// cachedLookups is objectLookups over a Storage on SQLite in a temp dir,
// its watch cache running until the test ends.
func cachedLookups(t *testing.T) *objectLookups {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Builtin(registry.Hooks{})...)
	if err != nil {
		t.Fatal(err)
	}
	s := storage.New(st, reg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Cache().Run(ctx, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	return &objectLookups{st: s, reg: reg}
}

func createForLookups(t *testing.T, ctx context.Context, l *objectLookups, group, resource string, obj runtime.Object) {
	t.Helper()
	res, ok := l.reg.Lookup(group, "v1", resource)
	if !ok {
		t.Fatalf("no resource %s", resource)
	}
	if _, err := l.st.Create(ctx, res, obj); err != nil {
		t.Fatal(err)
	}
}

func webhookService(name string, mutate func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.20",
			Ports: []corev1.ServicePort{
				{Name: "metrics", Port: 8080, TargetPort: intstr.FromInt32(8080)},
				{Name: "https", Port: 9443, TargetPort: intstr.FromInt32(9444)},
			},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func webhookSlice(name, svc string, family discoveryv1.AddressType, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port)}, {Name: ptr.To("metrics"), Port: ptr.To[int32](8080)}},
		Endpoints:   eps,
	}
}

func webhookEndpoint(addr string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
}

func TestResolveService_FromWatchCache_ReadyEndpointAtTargetPort(t *testing.T) {
	l := cachedLookups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, svc := range []*corev1.Service{
		webhookService("hook", nil),
		webhookService("unready", nil),
		webhookService("noslices", nil),
		webhookService("dual", func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		}),
		webhookService("external", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "hooks.example.com"}
		}),
	} {
		createForLookups(t, ctx, l, "", "services", svc)
	}
	for _, sl := range []*discoveryv1.EndpointSlice{
		webhookSlice("hook-a", "hook", discoveryv1.AddressTypeIPv4, 9444, webhookEndpoint("10.42.0.5", false), webhookEndpoint("10.42.0.6", true)),
		webhookSlice("hook-b", "hook", discoveryv1.AddressTypeIPv4, 9444, webhookEndpoint("10.42.0.7", false)),
		// Another Service's slice, in the same namespace, is never used.
		webhookSlice("other", "someone-else", discoveryv1.AddressTypeIPv4, 9444, webhookEndpoint("10.42.9.9", true)),
		webhookSlice("unready-a", "unready", discoveryv1.AddressTypeIPv4, 9444, webhookEndpoint("10.42.0.8", false)),
		webhookSlice("dual-v4", "dual", discoveryv1.AddressTypeIPv4, 9444, webhookEndpoint("10.42.0.9", true)),
		webhookSlice("dual-v6", "dual", discoveryv1.AddressTypeIPv6, 9444, webhookEndpoint("fd00::9", true)),
	} {
		createForLookups(t, ctx, l, "discovery.k8s.io", "endpointslices", sl)
	}
	if err := l.st.Cache().WaitCurrent(ctx); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, svc string
		port      int32
		want      string
		check     func(error) bool
		msg       string
	}{
		{"the ready endpoint, at the target port", "hook", 9443, "10.42.0.6:9444", nil, ""},
		{"another Service port picks its slice port", "hook", 8080, "10.42.0.6:8080", nil, ""},
		{"the Service's primary family first", "dual", 9443, "[fd00::9]:9444", nil, ""},
		{"ExternalName goes to its name", "external", 443, "hooks.example.com:443", nil, ""},
		{"port the Service does not have", "hook", 443, "", apierrors.IsServiceUnavailable, `no service port 443 found for service "hook"`},
		{"only unready endpoints", "unready", 9443, "", apierrors.IsServiceUnavailable, `no endpoints available for service "unready"`},
		{"no endpoint slices", "noslices", 9443, "", apierrors.IsServiceUnavailable, `no endpoints available for service "noslices"`},
		{"no such Service", "missing", 9443, "", apierrors.IsNotFound, `services "missing" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, err := l.ResolveService(ctx, "ns", tc.svc, tc.port)
			if tc.check != nil {
				if err == nil || !tc.check(err) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("ResolveService = %q, %v; want an error saying %q", addr, err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if addr != tc.want {
				t.Errorf("ResolveService = %q, want %q", addr, tc.want)
			}
		})
	}
}

func TestResolveService_ServiceNotYetInCache_WaitsForTheCache(t *testing.T) {
	l := cachedLookups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createForLookups(t, ctx, l, "discovery.k8s.io", "endpointslices", webhookSlice("late-a", "late", discoveryv1.AddressTypeIPv4, 9444, webhookEndpoint("10.42.0.10", true)))
	if err := l.st.Cache().WaitCurrent(ctx); err != nil {
		t.Fatal(err)
	}
	// Created and resolved at once, as a webhook configured right after
	// its Service: the resolver must not answer from a stale cache.
	createForLookups(t, ctx, l, "", "services", webhookService("late", nil))
	addr, err := l.ResolveService(ctx, "ns", "late", 9443)
	if err != nil || addr != "10.42.0.10:9444" {
		t.Errorf("ResolveService = %q, %v; want 10.42.0.10:9444", addr, err)
	}
}
