package endpointslice

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var webPort = corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}

func pods(n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = testPod(fmt.Sprintf("web-%03d", i), fmt.Sprintf("10.42.%d.%d", i/250, i%250+1))
	}
	return out
}

// applyPlan plays the server: it returns the slices that exist after the
// plan, naming created ones.
func applyPlan(existing []*discovery.EndpointSlice, p plan) []*discovery.EndpointSlice {
	byName := map[string]*discovery.EndpointSlice{}
	var order []string
	for _, s := range existing {
		byName[s.Name] = s
		order = append(order, s.Name)
	}
	for _, s := range p.update {
		byName[s.Name] = s
	}
	for _, s := range p.delete {
		delete(byName, s.Name)
	}
	for i, s := range p.create {
		s = s.DeepCopy()
		s.Name = s.GenerateName + strconv.Itoa(len(order)+i)
		s.UID = types.UID(s.Name)
		byName[s.Name] = s
		order = append(order, s.Name)
	}
	var out []*discovery.EndpointSlice
	for _, n := range order {
		if s, ok := byName[n]; ok {
			out = append(out, s)
		}
	}
	return out
}

func countEndpoints(slices []*discovery.EndpointSlice) (total, ready int) {
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			total++
			if *ep.Conditions.Ready {
				ready++
			}
		}
	}
	return total, ready
}

// converge builds the slices for pods from nothing.
func converge(t *testing.T, svc *corev1.Service, ps []*corev1.Pod, maxPerSlice int) []*discovery.EndpointSlice {
	t.Helper()
	p := reconcile(svc, nil, desiredGroups(svc, ps, noZones), maxPerSlice)
	return applyPlan(nil, p)
}

func TestReconcile(t *testing.T) {
	svc := testService("web", webPort)
	tests := []struct {
		name string
		// before are the pods the slices were built for (no slices at all
		// when fresh), after the pods now.
		fresh                         bool
		before, after                 []*corev1.Pod
		max                           int
		creates, updates, deletes     int
		wantSlices, wantTotal, wantRd int
	}{
		{"three ready pods make one slice", true, nil, pods(3), 100, 1, 0, 0, 1, 3, 3},
		{"250 pods make three slices", true, nil, pods(250), 100, 3, 0, 0, 3, 250, 250},
		{"nothing changed writes nothing", false, pods(3), pods(3), 100, 0, 0, 0, 1, 3, 3},
		{"one pod turning not ready rewrites only its slice", false, pods(250), append(pods(250)[:120:120], append([]*corev1.Pod{notReady(pods(250)[120])}, pods(250)[121:]...)...), 100, 0, 1, 0, 3, 250, 249},
		{"a new pod goes into a slice with room", false, pods(250), pods(251), 100, 0, 1, 0, 3, 251, 251},
		{"a removed pod only rewrites its slice", false, pods(250), pods(250)[1:], 100, 0, 1, 0, 3, 249, 249},
		{"no pods left keeps one empty slice", false, pods(3), nil, 100, 0, 1, 0, 1, 0, 0},
		{"no pods at all gets a placeholder", true, nil, nil, 100, 1, 0, 0, 1, 0, 0},
		{"slices shrink to a smaller maximum", false, pods(100), pods(100), 40, 2, 1, 0, 3, 100, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var existing []*discovery.EndpointSlice
			if !tt.fresh {
				existing = converge(t, svc, tt.before, 100)
			}
			p := reconcile(svc, existing, desiredGroups(svc, tt.after, noZones), tt.max)
			if len(p.create) != tt.creates || len(p.update) != tt.updates || len(p.delete) != tt.deletes {
				t.Errorf("plan creates/updates/deletes %d/%d/%d, want %d/%d/%d", len(p.create), len(p.update), len(p.delete), tt.creates, tt.updates, tt.deletes)
			}
			after := applyPlan(existing, p)
			total, ready := countEndpoints(after)
			if len(after) != tt.wantSlices || total != tt.wantTotal || ready != tt.wantRd {
				t.Errorf("after: %d slices, %d endpoints, %d ready; want %d, %d, %d", len(after), total, ready, tt.wantSlices, tt.wantTotal, tt.wantRd)
			}
			for _, s := range after {
				if len(s.Endpoints) > tt.max {
					t.Errorf("slice %s has %d endpoints, over %d", s.Name, len(s.Endpoints), tt.max)
				}
			}
			if again := reconcile(svc, after, desiredGroups(svc, tt.after, noZones), tt.max); !again.empty() {
				t.Errorf("second pass not empty: %d/%d/%d", len(again.create), len(again.update), len(again.delete))
			}
		})
	}
}

func TestReconcile_PlaceholderReusedWhenPodsAppear(t *testing.T) {
	svc := testService("web", webPort)
	existing := converge(t, svc, nil, 100)
	p := reconcile(svc, existing, desiredGroups(svc, pods(3), noZones), 100)
	if len(p.create) != 0 || len(p.delete) != 0 || len(p.update) != 1 || p.update[0].Name != existing[0].Name {
		t.Fatalf("plan creates/updates/deletes %d/%d/%d, want the placeholder updated in place", len(p.create), len(p.update), len(p.delete))
	}
	if len(p.update[0].Endpoints) != 3 || len(p.update[0].Ports) != 1 {
		t.Errorf("placeholder now has %d endpoints and %d ports, want 3 and 1", len(p.update[0].Endpoints), len(p.update[0].Ports))
	}
}

func TestReconcile_TargetPortChange_ReusesSlice(t *testing.T) {
	svc := testService("web", webPort)
	existing := converge(t, svc, pods(3), 100)
	changed := svc.DeepCopy()
	changed.Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
	p := reconcile(changed, existing, desiredGroups(changed, pods(3), noZones), 100)
	if len(p.create) != 0 || len(p.delete) != 0 || len(p.update) != 1 {
		t.Fatalf("plan creates/updates/deletes %d/%d/%d, want one update", len(p.create), len(p.update), len(p.delete))
	}
	if got := *p.update[0].Ports[0].Port; got != 9090 {
		t.Errorf("port = %d, want 9090", got)
	}
}

func TestReconcile_Metadata(t *testing.T) {
	svc := testService("web", webPort)
	existing := converge(t, svc, pods(3), 100)
	s := existing[0]
	if s.Labels[discovery.LabelServiceName] != "web" || s.Labels[discovery.LabelManagedBy] != ControllerName {
		t.Errorf("labels = %v", s.Labels)
	}
	if _, ok := s.Labels[LabelHeadless]; ok {
		t.Errorf("headless label on a service with a cluster IP")
	}
	if s.GenerateName != "web-" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != svc.UID || !*s.OwnerReferences[0].Controller {
		t.Errorf("generateName %q, owners %+v", s.GenerateName, s.OwnerReferences)
	}

	relabelled := svc.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	relabelled.Spec.ClusterIP = corev1.ClusterIPNone
	p := reconcile(relabelled, existing, desiredGroups(relabelled, pods(3), noZones), 100)
	if len(p.update) != 1 {
		t.Fatalf("%d updates, want 1", len(p.update))
	}
	got := p.update[0].Labels
	if got["team"] != "a" || got[LabelHeadless] != "" || got[discovery.LabelServiceName] != "web" {
		t.Errorf("labels after service change = %v", got)
	}
	if _, ok := got[LabelHeadless]; !ok {
		t.Errorf("headless label missing: %v", got)
	}
}
