package policy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"skiff/server/audit"
)

const (
	// validationFailureKey is the annotation the Audit action writes.
	validationFailureKey = "validation.policy.admission.k8s.io/validation_failure"
	// maxValidationFailures bounds that annotation (upstream: ~10 KB).
	maxValidationFailures = 50
	// maxAuditAnnotationValue is upstream's cut for an auditAnnotation.
	maxAuditAnnotationValue = 10 * 1024
)

// validationFailure is one entry of the validation_failure annotation, in
// upstream's JSON.
type validationFailure struct {
	Message           string                                     `json:"message"`
	Policy            string                                     `json:"policy"`
	Binding           string                                     `json:"binding"`
	ExpressionIndex   int                                        `json:"expressionIndex"`
	ValidationActions []admissionregistrationv1.ValidationAction `json:"validationActions"`
}

// auditRecord is what one request's pass over the policies adds to its
// audit event, published once all policies ran.
type auditRecord struct {
	failures []validationFailure
	// values are each policy's auditAnnotations: key → distinct values in
	// the order bindings and params produced them.
	values map[string]map[string][]string
}

func (r *run) auditRecord() *auditRecord {
	if r.audited == nil {
		r.audited = &auditRecord{values: map[string]map[string][]string{}}
	}
	return r.audited
}

// auditFailure is the Audit action: the failure goes into the
// validation_failure annotation.
func (r *run) auditFailure(pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, d decision) {
	rec := r.auditRecord()
	rec.failures = append(rec.failures, validationFailure{Message: d.message, Policy: pol.Name, Binding: b.Name,
		ExpressionIndex: d.index, ValidationActions: b.Spec.ValidationActions})
}

// auditAnnotations evaluates a policy's auditAnnotations for one binding
// and param, with a budget of their own as upstream: a string value is
// kept (trimmed; empty is skipped), null is skipped, anything else or an
// error refuses the request unless failurePolicy is Ignore.
func (r *run) auditAnnotations(pol *admissionregistrationv1.ValidatingAdmissionPolicy, cp *compiledPolicy, vars map[string]any) []decision {
	if len(cp.auditAnnotations) == 0 {
		return nil
	}
	ignore := failurePolicy(pol) == admissionregistrationv1.Ignore
	e := newEvaluation(r.ctx, vars, variablesOrNil(pol, cp))
	var out []decision
	for _, a := range cp.auditAnnotations {
		val, err := e.run(a.prog)
		if err == nil {
			switch val.Type() {
			case types.StringType:
				if v := strings.TrimSpace(val.Value().(string)); v != "" {
					r.auditRecord().add(pol.Name, a.name, v)
				}
				continue
			case types.NullType:
				continue
			}
			err = fmt.Errorf("valueExpression '%v' resulted in unsupported return type: %v. Return type must be either string or null.",
				valueExpression(pol, a.name), val.Type())
		}
		if !ignore {
			out = append(out, decision{message: err.Error(), deny: true})
		}
	}
	return out
}

func valueExpression(pol *admissionregistrationv1.ValidatingAdmissionPolicy, key string) string {
	for _, a := range pol.Spec.AuditAnnotations {
		if a.Key == key {
			return a.ValueExpression
		}
	}
	return ""
}

// add keeps a value once: bindings that agree make one value.
func (rec *auditRecord) add(policy, key, value string) {
	if len(value) > maxAuditAnnotationValue {
		value = value[:maxAuditAnnotationValue]
	}
	keys := rec.values[policy]
	if keys == nil {
		keys = map[string][]string{}
		rec.values[policy] = keys
	}
	for _, v := range keys[key] {
		if v == value {
			return
		}
	}
	keys[key] = append(keys[key], value)
}

// publishAudit annotates the request's audit event: "<policy>/<key>" for
// each auditAnnotation (distinct values of several bindings or params
// joined by ", "), and the validation failures of the Audit action.
func (r *run) publishAudit() {
	rec := r.audited
	if rec == nil {
		return
	}
	for policy, keys := range rec.values {
		for key, values := range keys {
			audit.AddAnnotation(r.ctx, policy+"/"+key, strings.Join(values, ", "))
		}
	}
	if len(rec.failures) == 0 {
		return
	}
	failures := rec.failures
	if len(failures) > maxValidationFailures {
		failures = failures[:maxValidationFailures]
	}
	if b, err := json.Marshal(failures); err == nil {
		audit.AddAnnotation(r.ctx, validationFailureKey, string(b))
	}
}
