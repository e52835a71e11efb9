package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// events.k8s.io/v1 Events are the core/v1 Events, as upstream stores them:
// one object served in two group-versions, so an event recorded through
// either API is seen (and selected, patched, deleted) through both. The
// core type holds every events.k8s.io field; the renamed ones are
// upstream's pkg/apis/events/v1 conversion.
func eventsV1Conversion() *Conversion {
	core := ""
	return &Conversion{
		StorageVersion: "v1",
		StorageGroup:   &core,
		NewStored:      func() runtime.Object { return &corev1.Event{} },
		ToStorage: func(obj runtime.Object) (runtime.Object, error) {
			in, ok := obj.(*eventsv1.Event)
			if !ok {
				return nil, fmt.Errorf("convert to core/v1 Event: unexpected %T", obj)
			}
			return EventToCore(in), nil
		},
		FromStorage: func(obj runtime.Object) (runtime.Object, error) {
			in, ok := obj.(*corev1.Event)
			if !ok {
				return nil, fmt.Errorf("convert to events.k8s.io/v1 Event: unexpected %T", obj)
			}
			return EventToV1(in), nil
		},
	}
}

// EventToCore converts an events.k8s.io/v1 Event to core/v1.
func EventToCore(in *eventsv1.Event) *corev1.Event {
	in = in.DeepCopy()
	out := &corev1.Event{
		TypeMeta:            metaTypeCoreEvent,
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

// EventToV1 converts a core/v1 Event to events.k8s.io/v1.
func EventToV1(in *corev1.Event) *eventsv1.Event {
	in = in.DeepCopy()
	out := &eventsv1.Event{
		TypeMeta:                 metaTypeEventsV1,
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

var (
	metaTypeCoreEvent = metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}
	metaTypeEventsV1  = metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"}
)

// eventsV1Fields are the core event fields under their events.k8s.io
// names (upstream's field label conversion for events.k8s.io/v1).
func eventsV1Fields(e *eventsv1.Event) map[string]string {
	return map[string]string{
		"regarding.kind":            e.Regarding.Kind,
		"regarding.namespace":       e.Regarding.Namespace,
		"regarding.name":            e.Regarding.Name,
		"regarding.uid":             string(e.Regarding.UID),
		"regarding.apiVersion":      e.Regarding.APIVersion,
		"regarding.resourceVersion": e.Regarding.ResourceVersion,
		"regarding.fieldPath":       e.Regarding.FieldPath,
		"reason":                    e.Reason,
		"reportingController":       e.ReportingController,
		"type":                      e.Type,
	}
}
