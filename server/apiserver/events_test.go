package apiserver_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestEvents_OneObjectServedInBothGroups: an event written through
// events.k8s.io/v1 is the core/v1 event of the same name, with fields
// renamed as upstream converts them, and the other way round.
func TestEvents_OneObjectServedInBothGroups(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	core, events := h.client.CoreV1().Events("default"), h.client.EventsV1().Events("default")
	when := metav1.MicroTime{Time: time.Unix(1505828956, 0)}
	created, err := events.Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "ev", Labels: map[string]string{"testevent": "true"}},
		Regarding:  corev1.ObjectReference{Namespace: "default", Kind: "Pod", Name: "p"},
		EventTime:  when, Note: "This is ev", Action: "Do", Reason: "Test", Type: "Normal",
		ReportingController: "test-controller", ReportingInstance: "test-node",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	asCore, err := core.Get(ctx, "ev", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("core get of an events.k8s.io event: %v", err)
	}
	if asCore.Message != "This is ev" || asCore.InvolvedObject.Name != "p" || asCore.ReportingController != "test-controller" || asCore.UID != created.UID {
		t.Errorf("core view = %+v", asCore)
	}
	bySource, err := core.List(ctx, metav1.ListOptions{FieldSelector: "source=test-controller"})
	if err != nil || len(bySource.Items) != 1 {
		t.Errorf("core list by source = %v, %v; want the event (source falls back to reportingController)", bySource, err)
	}
	byController, err := events.List(ctx, metav1.ListOptions{FieldSelector: "reportingController=test-controller,regarding.name=p"})
	if err != nil || len(byController.Items) != 1 {
		t.Errorf("events list by reportingController = %v, %v", byController, err)
	}

	patch := `{"series":{"count":2,"lastObservedTime":"2017-09-19T13:49:11.000000Z"}}`
	if _, err := events.Patch(ctx, "ev", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch: %v", err)
	}
	got, err := events.Get(ctx, "ev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Series == nil || got.Series.Count != 2 || got.Note != "This is ev" || got.Regarding.Name != "p" || !got.EventTime.Equal(&when) {
		t.Errorf("after patch = %+v", got)
	}
	// Nothing else changed on the way through the core type and back.
	want := created.DeepCopy()
	want.Series = got.Series
	want.ResourceVersion, got.ResourceVersion, want.ManagedFields, got.ManagedFields = "", "", nil, nil
	if !apiequality.Semantic.DeepEqual(want, got) {
		t.Errorf("event changed beyond the patch:\n got %+v\nwant %+v", got, want)
	}
	if asCore, _ = core.Get(ctx, "ev", metav1.GetOptions{}); asCore.Series == nil || asCore.Series.Count != 2 {
		t.Errorf("core view after patch: series %+v", asCore.Series)
	}

	if _, err := core.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "old-style"},
		InvolvedObject: corev1.ObjectReference{Namespace: "default", Kind: "Pod", Name: "p"},
		Message:        "core message", Reason: "Test", Type: "Normal", Count: 3, Source: corev1.EventSource{Component: "kubelet"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old, err := events.Get(ctx, "old-style", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("events.k8s.io get of a core event: %v", err)
	}
	if old.Note != "core message" || old.DeprecatedCount != 3 || old.DeprecatedSource.Component != "kubelet" {
		t.Errorf("events.k8s.io view = %+v", old)
	}

	if err := core.Delete(ctx, "ev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted event to leave the events.k8s.io list", func() bool {
		l, err := events.List(ctx, metav1.ListOptions{LabelSelector: "testevent=true"})
		return err == nil && len(l.Items) == 0
	})
	if _, err := events.Get(ctx, "ev", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("events.k8s.io get after core delete = %v, want NotFound", err)
	}
	if err := events.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "reason=Test"}); err != nil {
		t.Fatalf("events.k8s.io deletecollection: %v", err)
	}
	if _, err := core.Get(ctx, "old-style", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("core get after events.k8s.io deletecollection = %v, want NotFound", err)
	}
}
