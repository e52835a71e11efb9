package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Length limits of event fields, kept small because events are numerous.
const (
	eventReasonLimit   = 128
	eventActionLimit   = 128
	eventInstanceLimit = 128
	eventNoteLimit     = 1024
)

// eventFields are the parts of an event both API groups share, under the
// field names of the group being validated.
type eventFields struct {
	namespace, involvedNamespace   string
	eventTime                      metav1.MicroTime
	controller, instance           string
	action, reason, note           string
	controllerName, involvedPrefix string
	notePath                       string
}

// validateCoreEvent follows upstream's lenient rules for core/v1 events,
// which predate object-name rules and are written by every old client.
func validateCoreEvent(e *corev1.Event) field.ErrorList {
	return validateEventCommon(eventFields{
		namespace: e.Namespace, involvedNamespace: e.InvolvedObject.Namespace, eventTime: e.EventTime,
		controller: e.ReportingController, instance: e.ReportingInstance,
		action: e.Action, reason: e.Reason, note: e.Message,
		controllerName: "reportingComponent", involvedPrefix: "involvedObject", notePath: "message",
	})
}

func validateEventCommon(f eventFields) field.ErrorList {
	var errs field.ErrorList
	involvedNS := field.NewPath(f.involvedPrefix, "namespace")
	if f.eventTime.IsZero() {
		// Old-style event: its namespace must agree with the object's.
		if f.involvedNamespace == "" {
			if f.namespace != metav1.NamespaceNone && f.namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(involvedNS, f.involvedNamespace, "does not match event.namespace"))
			}
		} else if f.namespace != f.involvedNamespace {
			errs = append(errs, field.Invalid(involvedNS, f.involvedNamespace, "does not match event.namespace"))
		}
	} else {
		if f.involvedNamespace == "" && f.namespace != metav1.NamespaceDefault && f.namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(involvedNS, f.involvedNamespace, "does not match event.namespace"))
		}
		if f.controller == "" {
			errs = append(errs, field.Required(field.NewPath(f.controllerName), ""))
		}
		errs = append(errs, qualifiedName(f.controller, field.NewPath(f.controllerName))...)
		errs = append(errs, requiredWithLimit(f.instance, eventInstanceLimit, field.NewPath("reportingInstance"))...)
		errs = append(errs, requiredWithLimit(f.action, eventActionLimit, field.NewPath("action"))...)
		errs = append(errs, requiredWithLimit(f.reason, eventReasonLimit, field.NewPath("reason"))...)
		if len(f.note) > eventNoteLimit {
			errs = append(errs, field.Invalid(field.NewPath(f.notePath), "", fmt.Sprintf("can have at most %v characters", eventNoteLimit)))
		}
	}
	if f.namespace != "" {
		errs = append(errs, dns1123Subdomain(f.namespace, field.NewPath("namespace"))...)
	}
	return errs
}

func requiredWithLimit(value string, limit int, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if len(value) > limit {
		return field.ErrorList{field.Invalid(fldPath, "", fmt.Sprintf("can have at most %v characters", limit))}
	}
	return nil
}

// validateEventsV1Event applies the strict rules of events.k8s.io/v1, which
// requires the structured fields and forbids the deprecated ones.
func validateEventsV1Event(e *eventsv1.Event) field.ErrorList {
	errs := validateEventCommon(eventFields{
		namespace: e.Namespace, involvedNamespace: e.Regarding.Namespace, eventTime: e.EventTime,
		controller: e.ReportingController, instance: e.ReportingInstance,
		action: e.Action, reason: e.Reason, note: e.Note,
		controllerName: "reportingController", involvedPrefix: "regarding", notePath: "note",
	})
	errs = append(errs, validateMeta(&e.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)...)
	errs = append(errs, validateEventSeries(e.Series)...)
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", e.Type)))
	}
	const unset = "needs to be unset"
	if !e.DeprecatedFirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("deprecatedFirstTimestamp"), "", unset))
	}
	if !e.DeprecatedLastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("deprecatedLastTimestamp"), "", unset))
	}
	if e.DeprecatedCount != 0 {
		errs = append(errs, field.Invalid(field.NewPath("deprecatedCount"), "", unset))
	}
	if e.DeprecatedSource.Component != "" || e.DeprecatedSource.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("deprecatedSource"), "", unset))
	}
	return errs
}

func validateEventSeries(s *eventsv1.EventSeries) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series", "count"), "", "should be at least 2"))
	}
	if s.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
	}
	return errs
}

// validateEventsV1EventUpdate: an event records what happened; only its
// series (repetition count) may move on.
func validateEventsV1EventUpdate(e, old *eventsv1.Event) field.ErrorList {
	errs := validateMetaUpdate(&e.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateEventSeries(e.Series)...)
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"regarding", e.Regarding, old.Regarding}, {"reportingController", e.ReportingController, old.ReportingController},
		{"reportingInstance", e.ReportingInstance, old.ReportingInstance}, {"action", e.Action, old.Action},
		{"reason", e.Reason, old.Reason}, {"note", e.Note, old.Note}, {"deprecatedSource", e.DeprecatedSource, old.DeprecatedSource},
		{"eventTime", e.EventTime, old.EventTime}, {"related", e.Related, old.Related}, {"type", e.Type, old.Type},
	} {
		errs = append(errs, immutable(f.new, f.old, field.NewPath(f.name))...)
	}
	return errs
}
