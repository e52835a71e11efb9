package endpoints

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func svcWith(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.43.0.10", Ports: ports},
	}
}

func podWith(name, ip string, ready bool, ports ...corev1.ContainerPort) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func ips(a []corev1.EndpointAddress) []string {
	out := []string{}
	for _, x := range a {
		out = append(out, x.IP)
	}
	return out
}

func TestDesiredSubsets(t *testing.T) {
	http := corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}
	metrics := corev1.ServicePort{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9100)}
	web := func(p int32) corev1.ContainerPort {
		return corev1.ContainerPort{Name: "web", ContainerPort: p, Protocol: corev1.ProtocolTCP}
	}
	deleting := podWith("d", "10.42.0.9", true, web(8080))
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	done := podWith("s", "10.42.0.8", true, web(8080))
	done.Status.Phase = corev1.PodSucceeded
	headless := svcWith()
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	publish := svcWith(http)
	publish.Spec.PublishNotReadyAddresses = true
	type want struct {
		ready, notReady []string
		ports           int
	}
	tests := []struct {
		name string
		svc  *corev1.Service
		pods []*corev1.Pod
		want []want
	}{
		{"ready and not ready apart, sorted", svcWith(http), []*corev1.Pod{
			podWith("b", "10.42.0.2", true, web(8080)), podWith("a", "10.42.0.1", true, web(8080)), podWith("c", "10.42.0.3", false, web(8080)),
		}, []want{{[]string{"10.42.0.1", "10.42.0.2"}, []string{"10.42.0.3"}, 1}}},
		{"named port resolving differently makes two subsets", svcWith(http), []*corev1.Pod{
			podWith("a", "10.42.0.1", true, web(8080)), podWith("b", "10.42.0.2", true, web(8081)),
		}, []want{{[]string{"10.42.0.1"}, []string{}, 1}, {[]string{"10.42.0.2"}, []string{}, 1}}},
		{"pod missing a named port keeps the others", svcWith(http, metrics), []*corev1.Pod{
			podWith("a", "10.42.0.1", true, web(8080)), podWith("b", "10.42.0.2", true),
		}, []want{{[]string{"10.42.0.1"}, []string{}, 2}, {[]string{"10.42.0.2"}, []string{}, 1}}},
		{"terminating and finished pods are left out", svcWith(http), []*corev1.Pod{deleting, done}, []want{}},
		{"publishNotReadyAddresses lists not ready and terminating pods as ready", publish, []*corev1.Pod{
			podWith("a", "10.42.0.1", false, web(8080)), deleting,
		}, []want{{[]string{"10.42.0.1", "10.42.0.9"}, []string{}, 1}}},
		{"headless without ports lists addresses", headless, []*corev1.Pod{podWith("a", "10.42.0.1", true)}, []want{{[]string{"10.42.0.1"}, []string{}, 0}}},
		{"pod without an IP is left out", svcWith(http), []*corev1.Pod{podWith("a", "", true, web(8080))}, []want{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := desiredSubsets(tt.svc, tt.pods)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d subsets %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				if fmt.Sprint(ips(got[i].Addresses)) != fmt.Sprint(w.ready) || fmt.Sprint(ips(got[i].NotReadyAddresses)) != fmt.Sprint(w.notReady) || len(got[i].Ports) != w.ports {
					t.Errorf("subset %d: ready %v notReady %v ports %d; want %v %v %d", i, ips(got[i].Addresses), ips(got[i].NotReadyAddresses), len(got[i].Ports), w.ready, w.notReady, w.ports)
				}
			}
		})
	}
}

func addrs(n int) []corev1.EndpointAddress {
	out := make([]corev1.EndpointAddress, n)
	for i := range out {
		out[i].IP = fmt.Sprintf("10.42.%d.%d", i/250, i%250+1)
	}
	return out
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name                     string
		in                       []corev1.EndpointSubset
		max                      int
		truncated                bool
		wantReady, wantNotReady  []int
		wantTotalReady, wantTotN int
	}{
		{"under the cap is untouched", []corev1.EndpointSubset{{Addresses: addrs(5), NotReadyAddresses: addrs(5)}}, 10, false, []int{5}, []int{5}, 5, 5},
		{"not ready addresses are cut first", []corev1.EndpointSubset{{Addresses: addrs(8), NotReadyAddresses: addrs(8)}}, 10, true, []int{8}, []int{2}, 8, 2},
		{"too many ready ones drop all not ready", []corev1.EndpointSubset{{Addresses: addrs(12), NotReadyAddresses: addrs(3)}}, 10, true, []int{10}, []int{0}, 10, 0},
		{"the cut is shared in proportion", []corev1.EndpointSubset{{Addresses: addrs(900)}, {Addresses: addrs(300)}}, 1000, true, []int{750, 250}, []int{0, 0}, 1000, 0},
		{"a subset left empty is dropped", []corev1.EndpointSubset{{Addresses: addrs(10)}, {NotReadyAddresses: addrs(5)}}, 10, true, []int{10}, []int{0}, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated := truncate(tt.in, tt.max)
			if truncated != tt.truncated || len(got) != len(tt.wantReady) {
				t.Fatalf("truncated %v with %d subsets, want %v with %d", truncated, len(got), tt.truncated, len(tt.wantReady))
			}
			r, n := 0, 0
			for i, s := range got {
				r, n = r+len(s.Addresses), n+len(s.NotReadyAddresses)
				if len(s.Addresses) != tt.wantReady[i] || len(s.NotReadyAddresses) != tt.wantNotReady[i] {
					t.Errorf("subset %d: %d ready %d not ready, want %d %d", i, len(s.Addresses), len(s.NotReadyAddresses), tt.wantReady[i], tt.wantNotReady[i])
				}
			}
			if r != tt.wantTotalReady || n != tt.wantTotN || r+n > tt.max {
				t.Errorf("totals %d/%d, want %d/%d within %d", r, n, tt.wantTotalReady, tt.wantTotN, tt.max)
			}
		})
	}
}

func TestTriggerTimes_EarliestUnexportedChange(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := svcWith()
	svc.CreationTimestamp = metav1.NewTime(base)
	at := func(name string, d time.Duration) *corev1.Pod {
		p := podWith(name, "10.42.0.1", true)
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(base.Add(d))
		return p
	}
	tr := newTriggerTimes()
	// sync computes the trigger and records it when its write succeeded.
	sync := func(written bool, pods ...*corev1.Pod) time.Time {
		got, record := tr.compute("default/web", svc, pods)
		if written {
			record()
		}
		return got
	}
	if got := sync(true, at("a", time.Minute)); !got.Equal(base) {
		t.Errorf("first sync = %v, want the service creation %v", got, base)
	}
	if got := sync(true, at("a", time.Minute)); !got.IsZero() {
		t.Errorf("nothing changed = %v, want zero", got)
	}
	// A write lost to a conflict does not count: the retry carries the
	// same trigger.
	if got := sync(false, at("a", 3*time.Minute), at("b", 2*time.Minute)); !got.Equal(base.Add(2 * time.Minute)) {
		t.Errorf("two changes, write lost = %v, want the earlier %v", got, base.Add(2*time.Minute))
	}
	got := sync(true, at("a", 3*time.Minute), at("b", 2*time.Minute))
	if !got.Equal(base.Add(2 * time.Minute)) {
		t.Errorf("two changes = %v, want the earlier %v", got, base.Add(2*time.Minute))
	}
}
