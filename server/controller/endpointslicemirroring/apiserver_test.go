package endpointslicemirroring

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/controller/controllertest"
)

type env struct {
	*controllertest.Env
	t *testing.T
}

// start runs the controller with one worker, so the queue is first in
// first out: once a later key is synced, an earlier one is too.
func start(t *testing.T) *env {
	t.Helper()
	e := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 50 * time.Second})
	cfg := Config{Client: e.Client, Informers: e.Informers, Recorder: e.Events, Workers: 1, Logger: controllertest.Logger(t, slog.LevelWarn)}
	controllertest.Run(t, e.Ctx, func(ctx context.Context) error { return Run(ctx, cfg) })
	return &env{Env: e, t: t}
}

func (e *env) service(name string, selector map[string]string) {
	e.t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "example", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := e.Client.CoreV1().Services("default").Create(e.Ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func endpointsOf(name string, labels map[string]string, ips ...string) *corev1.Endpoints {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}}}
	for _, ip := range ips {
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: ip})
	}
	return ep
}

func (e *env) slices(name string) []discovery.EndpointSlice {
	e.t.Helper()
	list, err := e.Client.DiscoveryV1().EndpointSlices("default").List(e.Ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// mirrors reports whether name's slices are exactly one holding ips.
func (e *env) mirrors(name string, ips ...string) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		s := e.slices(name)
		if len(s) != 1 || len(s[0].Endpoints) != len(ips) || len(s[0].Ports) != 1 || *s[0].Ports[0].Port != 80 {
			return false, nil
		}
		for i, ip := range ips {
			if s[0].Endpoints[i].Addresses[0] != ip {
				return false, nil
			}
		}
		return s[0].Labels[discovery.LabelManagedBy] == ControllerName, nil
	}
}

func (e *env) none(name string) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) { return len(e.slices(name)) == 0, nil }
}

// As the conformance test does: a selector-less Service, its Endpoints
// created, updated, deleted.
func TestMirroring_CustomEndpoints_FollowedThroughCreateUpdateDelete(t *testing.T) {
	e := start(t)
	e.service("example", nil)
	ep, err := e.Client.CoreV1().Endpoints("default").Create(e.Ctx, endpointsOf("example", map[string]string{"team": "a"}, "10.1.2.3"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, e.mirrors("example", "10.1.2.3"), "a slice of 10.1.2.3")
	if s := e.slices("example")[0]; s.Labels["team"] != "a" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != ep.UID {
		t.Errorf("slice labels %v owners %v", s.Labels, s.OwnerReferences)
	}
	ep.Subsets[0].Addresses = []corev1.EndpointAddress{{IP: "10.2.3.4"}}
	if _, err := e.Client.CoreV1().Endpoints("default").Update(e.Ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, e.mirrors("example", "10.2.3.4"), "the slice updated to 10.2.3.4")
	if err := e.Client.CoreV1().Endpoints("default").Delete(e.Ctx, "example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, e.none("example"), "the slices gone")
}

func TestMirroring_SliceDeletedByHand_Recreated(t *testing.T) {
	e := start(t)
	e.service("example", nil)
	if _, err := e.Client.CoreV1().Endpoints("default").Create(e.Ctx, endpointsOf("example", nil, "10.1.2.3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, e.mirrors("example", "10.1.2.3"), "a slice")
	first := e.slices("example")[0].Name
	if err := e.Client.DiscoveryV1().EndpointSlices("default").Delete(e.Ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		ok, _ := e.mirrors("example", "10.1.2.3")(ctx)
		return ok && e.slices("example")[0].Name != first, nil
	}, "a new slice")
}

func TestMirroring_NotMirrored_NoSlices(t *testing.T) {
	cases := []struct {
		name     string
		selector map[string]string
		labels   map[string]string
		service  bool
	}{
		{"service with a selector", map[string]string{"app": "web"}, nil, true},
		{"skip-mirror label", nil, map[string]string{discovery.LabelSkipMirror: "true"}, true},
		{"no service", nil, nil, false},
	}
	e := start(t)
	for i, c := range cases {
		name := fmt.Sprintf("case-%d", i)
		if c.service {
			e.service(name, c.selector)
		}
		if _, err := e.Client.CoreV1().Endpoints("default").Create(e.Ctx, endpointsOf(name, c.labels, "10.1.2.3"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// One worker: once a later, mirrored Endpoints has its slice, the
	// cases before it have been synced.
	e.service("control", nil)
	if _, err := e.Client.CoreV1().Endpoints("default").Create(e.Ctx, endpointsOf("control", nil, "10.9.9.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, e.mirrors("control", "10.9.9.9"), "the control slice")
	for i, c := range cases {
		if s := e.slices(fmt.Sprintf("case-%d", i)); len(s) != 0 {
			t.Errorf("%s: %d slices mirrored", c.name, len(s))
		}
	}
}

func TestMirroring_ServiceGainsSelector_SlicesDeleted(t *testing.T) {
	e := start(t)
	e.service("example", nil)
	if _, err := e.Client.CoreV1().Endpoints("default").Create(e.Ctx, endpointsOf("example", nil, "10.1.2.3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, e.mirrors("example", "10.1.2.3"), "a slice")
	svc, err := e.Client.CoreV1().Services("default").Get(e.Ctx, "example", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"app": "web"}
	if _, err := e.Client.CoreV1().Services("default").Update(e.Ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, e.Ctx, 10*time.Second, e.none("example"), "the mirrored slices gone")
}
