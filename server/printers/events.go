package printers

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// eventColumns are shared by core/v1 and events.k8s.io/v1 events, which
// upstream stores as one type and prints alike. Unlike every other kind the
// Name column comes last, and only with -o wide.
func eventColumns() []metav1.TableColumnDefinition {
	doc := corev1.Event{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		column("Last Seen", "string", doc["lastTimestamp"]),
		column("Type", "string", doc["type"]),
		column("Reason", "string", doc["reason"]),
		column("Object", "string", doc["involvedObject"]),
		wideColumn("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
		wideColumn("Source", "string", doc["source"]),
		column("Message", "string", doc["message"]),
		wideColumn("First Seen", "string", doc["firstTimestamp"]),
		wideColumn("Count", "string", doc["count"]),
		{Name: "Name", Type: "string", Format: "name", Priority: 1, Description: objectMetaDoc("name")},
	}
}

func coreEventPrinter() Printer {
	return Printer{Columns: eventColumns(), Cells: coreEventCells}
}

func eventsV1Printer() Printer {
	return Printer{Columns: eventColumns(), Cells: eventsV1Cells}
}

func coreEventCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ev, err := typed[corev1.Event](obj)
	if err != nil {
		return nil, err
	}
	return eventCells(ev, now), nil
}

// eventsV1Cells maps the new API's fields onto the core/v1 names, as the
// apiserver's conversion between the two does.
func eventsV1Cells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ev, err := typed[eventsv1.Event](obj)
	if err != nil {
		return nil, err
	}
	core := &corev1.Event{
		ObjectMeta:          ev.ObjectMeta,
		InvolvedObject:      ev.Regarding,
		Reason:              ev.Reason,
		Message:             ev.Note,
		Source:              ev.DeprecatedSource,
		FirstTimestamp:      ev.DeprecatedFirstTimestamp,
		LastTimestamp:       ev.DeprecatedLastTimestamp,
		Count:               ev.DeprecatedCount,
		Type:                ev.Type,
		EventTime:           ev.EventTime,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
	}
	if ev.Series != nil {
		core.Series = &corev1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return eventCells(core, now), nil
}

func eventCells(ev *corev1.Event, now time.Time) []interface{} {
	first := translateTimestampSince(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		first = translateMicroTimestampSince(ev.EventTime, now)
	}
	last := translateTimestampSince(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = translateMicroTimestampSince(ev.Series.LastObservedTime, now)
		count = ev.Series.Count
	} else if count == 0 {
		// Singleton events written through the new API carry no count.
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target = fmt.Sprintf("%s/%s", target, ev.InvolvedObject.Name)
	}
	return []interface{}{
		last,
		ev.Type,
		ev.Reason,
		target,
		ev.InvolvedObject.FieldPath,
		eventSource(ev),
		strings.TrimSpace(ev.Message),
		first,
		int64(count),
		ev.Name,
	}
}

// eventSource is "component, host", falling back to the reporting
// controller and instance that newer clients fill instead.
func eventSource(ev *corev1.Event) string {
	component := ev.Source.Component
	if component == "" {
		component = ev.ReportingController
	}
	host := ev.Source.Host
	if host == "" {
		host = ev.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}
