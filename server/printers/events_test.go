package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func microAgo(d time.Duration) metav1.MicroTime {
	return metav1.NewMicroTime(testNow.Add(-d))
}

func TestEventColumnsAreTheSameForBothGroups(t *testing.T) {
	want := "Last Seen;Type;Reason;Object;*Subobject;*Source;Message;*First Seen;*Count;*Name"
	for _, group := range []string{"", "events.k8s.io"} {
		p, _ := For(schema.GroupKind{Group: group, Kind: "Event"})
		if got := header(p); got != want {
			t.Errorf("group %q: header %q, want %q", group, got, want)
		}
	}
}

func TestCoreEventCells(t *testing.T) {
	pod := corev1.ObjectReference{Kind: "Pod", Name: "web-0", FieldPath: "spec.containers{web}"}
	tests := []struct {
		name string
		ev   *corev1.Event
		want []interface{}
	}{
		{"repeated event from kubelet", &corev1.Event{
			ObjectMeta: objMeta("web-0.17f", time.Hour), InvolvedObject: pod, Type: "Warning", Reason: "BackOff",
			Message: "  Back-off restarting failed container\n", Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
			FirstTimestamp: ago(time.Hour), LastTimestamp: ago(2 * time.Minute), Count: 12,
		}, []interface{}{"2m", "Warning", "BackOff", "pod/web-0", "spec.containers{web}", "kubelet, node-1", "Back-off restarting failed container", "60m", int64(12), "web-0.17f"}},
		{"new-style event with only event time and reporting controller", &corev1.Event{
			ObjectMeta: objMeta("ev", time.Minute), InvolvedObject: corev1.ObjectReference{Kind: "Node"}, Type: "Normal", Reason: "Starting",
			EventTime: microAgo(30 * time.Second), ReportingController: "skiff-agent", ReportingInstance: "node-1",
		}, []interface{}{"30s", "Normal", "Starting", "node", "", "skiff-agent, node-1", "", "30s", int64(1), "ev"}},
		{"series gives last seen and count", &corev1.Event{
			ObjectMeta: objMeta("ev", time.Hour), InvolvedObject: pod, Type: "Normal", Reason: "Pulled",
			Source: corev1.EventSource{Component: "kubelet"}, EventTime: microAgo(time.Hour),
			Series: &corev1.EventSeries{Count: 4, LastObservedTime: microAgo(5 * time.Second)},
		}, []interface{}{"5s", "Normal", "Pulled", "pod/web-0", "spec.containers{web}", "kubelet", "", "60m", int64(4), "ev"}},
		{"no timestamps at all", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev"}},
			[]interface{}{"<unknown>", "", "", "", "", "", "", "<unknown>", int64(1), "ev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, schema.GroupKind{Kind: "Event"}, tt.ev, tt.want)
		})
	}
}

func TestEventsV1EventsPrintLikeCoreEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   *eventsv1.Event
		want []interface{}
	}{
		{"singleton event", &eventsv1.Event{
			ObjectMeta: objMeta("ev", time.Hour), Regarding: corev1.ObjectReference{Kind: "Deployment", Name: "web"},
			Type: "Normal", Reason: "ScalingReplicaSet", Note: "Scaled up replica set web-5d to 3",
			EventTime: microAgo(10 * time.Minute), ReportingController: "deployment-controller",
		}, []interface{}{"10m", "Normal", "ScalingReplicaSet", "deployment/web", "", "deployment-controller", "Scaled up replica set web-5d to 3", "10m", int64(1), "ev"}},
		{"series", &eventsv1.Event{
			ObjectMeta: objMeta("ev", time.Hour), Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p", FieldPath: "spec.containers{c}"},
			Type: "Warning", Reason: "BackOff", EventTime: microAgo(time.Hour), ReportingController: "kubelet", ReportingInstance: "node-1",
			Series: &eventsv1.EventSeries{Count: 9, LastObservedTime: microAgo(3 * time.Second)},
		}, []interface{}{"3s", "Warning", "BackOff", "pod/p", "spec.containers{c}", "kubelet, node-1", "", "60m", int64(9), "ev"}},
		{"deprecated fields written by a core client", &eventsv1.Event{
			ObjectMeta: objMeta("ev", time.Hour), Regarding: corev1.ObjectReference{Kind: "Pod", Name: "p"},
			DeprecatedSource: corev1.EventSource{Component: "kubelet", Host: "node-2"}, DeprecatedCount: 2,
			DeprecatedFirstTimestamp: ago(time.Hour), DeprecatedLastTimestamp: ago(time.Minute),
		}, []interface{}{"60s", "", "", "pod/p", "", "kubelet, node-2", "", "60m", int64(2), "ev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, tt.ev, tt.want)
		})
	}
}

func TestEventPrintersRejectTheOtherGroupsType(t *testing.T) {
	core, _ := For(schema.GroupKind{Kind: "Event"})
	v1, _ := For(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"})
	if _, err := Rows(core, []runtime.Object{&eventsv1.Event{}}, testNow); err == nil {
		t.Error("core printer accepted an events.k8s.io event")
	}
	if _, err := Rows(v1, []runtime.Object{&corev1.Event{}}, testNow); err == nil {
		t.Error("events.k8s.io printer accepted a core event")
	}
}
