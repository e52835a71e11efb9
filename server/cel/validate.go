package cel

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate evaluates the rules against obj (an unstructured JSON value) and
// old (nil on create: transition rules are skipped), naming each failing
// field below fld. A rule over its runtime cost budget is an error too.
// On update, errors of rules that do not use oldSelf are dropped where the
// value did not change (upstream's ratcheting).
func (v *Validator) Validate(ctx context.Context, fld *field.Path, obj, old any) field.ErrorList {
	if v == nil {
		return nil
	}
	var r ratchet
	if !isNil(old) {
		r.current = &correlation{old: old, new: obj, schema: v.schema}
	}
	errs, _ := v.validate(ctx, fld, obj, old, r, RuntimeCELCostBudget)
	return errs
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Pointer, reflect.Interface, reflect.Slice:
		return rv.IsNil()
	}
	return false
}

func (v *Validator) validate(ctx context.Context, fld *field.Path, obj, old any, r ratchet, budget int64) (field.ErrorList, int64) {
	if v == nil || obj == nil {
		return nil, budget
	}
	errs, budget := v.validateExpressions(ctx, fld, obj, old, r, budget)
	if budget < 0 {
		return errs, budget
	}
	for _, a := range v.allOf {
		// allOf errors are not ratcheted, as upstream's schema ratcheting
		// does not ratchet them either.
		var aerrs field.ErrorList
		aerrs, budget = a.validate(ctx, fld, obj, old, ratchet{parent: r.parent}, budget)
		errs = append(errs, aerrs...)
		if budget < 0 {
			return errs, budget
		}
	}
	var more field.ErrorList
	switch o := obj.(type) {
	case []any:
		oldList, _ := old.([]any)
		more, budget = v.validateArray(ctx, fld, o, oldList, r, budget)
	case map[string]any:
		oldMap, _ := old.(map[string]any)
		more, budget = v.validateMap(ctx, fld, o, oldMap, r, budget)
	}
	return append(errs, more...), budget
}

func (v *Validator) validateMap(ctx context.Context, fld *field.Path, obj, old map[string]any, r ratchet, budget int64) (field.ErrorList, int64) {
	var errs field.ErrorList
	// Every map type upstream knows (granular, atomic) correlates by key.
	if v.additionalProperties != nil {
		for k, val := range obj {
			var e field.ErrorList
			e, budget = v.additionalProperties.validate(ctx, fld.Key(k), val, old[k], r.key(k), budget)
			errs = append(errs, e...)
			if budget < 0 {
				return errs, budget
			}
		}
	}
	if v.properties != nil {
		for k, val := range obj {
			sub, ok := v.properties[k]
			if !ok {
				continue
			}
			var e field.ErrorList
			e, budget = sub.validate(ctx, fld.Child(k), val, old[k], r.key(k), budget)
			errs = append(errs, e...)
			if budget < 0 {
				return errs, budget
			}
		}
	}
	return errs, budget
}

func (v *Validator) validateArray(ctx context.Context, fld *field.Path, obj, old []any, r ratchet, budget int64) (field.ErrorList, int64) {
	if v.items == nil {
		return nil, budget
	}
	var errs field.ErrorList
	// Only map lists correlate items with old ones; other items have no
	// oldSelf.
	oldItems := makeMapList(v.schema, old)
	for i := range obj {
		var e field.ErrorList
		e, budget = v.items.validate(ctx, fld.Index(i), obj[i], oldItems.get(obj[i]), r.index(i), budget)
		errs = append(errs, e...)
		if budget < 0 {
			return errs, budget
		}
	}
	return errs, budget
}

// activation resolves self and oldSelf.
type activation struct {
	self, oldSelf ref.Val
	hasOldSelf    bool
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case ScopedVarName:
		return a.self, true
	case OldScopedVarName:
		return a.oldSelf, a.hasOldSelf
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// activations returns the activation of plain rules and that of
// optionalOldSelf rules (oldSelf an optional, none on create).
func (v *Validator) activations(s *apiextensionsv1.JSONSchemaProps, obj, old any) (*activation, *activation) {
	act := &activation{self: UnstructuredToVal(obj, s)}
	if !v.usesOldSelf {
		return act, act
	}
	opt := &activation{self: act.self, hasOldSelf: true, oldSelf: types.OptionalNone}
	if old != nil {
		act.oldSelf, act.hasOldSelf = UnstructuredToVal(old, s), true
		opt.oldSelf = types.OptionalOf(act.oldSelf)
	}
	return act, opt
}

const outOfBudget = "validation failed due to running out of cost budget, no further validation rules will be run"

func (v *Validator) validateExpressions(ctx context.Context, fld *field.Path, obj, old any, r ratchet, budget int64) (field.ErrorList, int64) {
	if isNil(old) {
		old = nil
	}
	s := v.schema
	if obj == nil {
		// Rules see only non-null values; a rule on the parent can check
		// for null.
		return nil, budget
	}
	if v.compileErr != nil {
		return field.ErrorList{field.Invalid(fld, s.Type, fmt.Sprintf("rule compiler initialization error: %v", v.compileErr))}, budget
	}
	if len(v.compiled) == 0 {
		return nil, budget
	}
	if budget <= 0 {
		return field.ErrorList{field.Invalid(fld, s.Type, outOfBudget)}, -1
	}
	if v.isResourceRoot {
		s = withTypeAndObjectMeta(s)
	}
	act, optAct := v.activations(s, obj, old)
	var errs field.ErrorList
	for i, cr := range v.compiled {
		rule := v.rules[i]
		if cr.err != nil {
			errs = append(errs, field.Invalid(fld, s.Type, fmt.Sprintf("rule compile error: %v", cr.err)))
			continue
		}
		if cr.program == nil {
			continue
		}
		optional := rule.OptionalOldSelf != nil && *rule.OptionalOldSelf
		// Transition rules run only where there is an old value to compare
		// with, unless they take oldSelf as an optional.
		if cr.usesOldSelf && old == nil && !optional {
			continue
		}
		ruleAct := act
		if optional {
			ruleAct = optAct
		}
		ruleErr, stop := v.evalRule(ctx, fld, s, obj, cr, rule, ruleAct, act, r, &budget)
		if ruleErr != nil {
			errs = append(errs, ruleErr)
		}
		if stop {
			return errs, -1
		}
	}
	return errs, budget
}

// evalRule evaluates one rule; it returns the rule's error, if any, and
// whether validation must stop (budget or per-call limit exhausted).
func (v *Validator) evalRule(ctx context.Context, fld *field.Path, s *apiextensionsv1.JSONSchemaProps, obj any, cr compiledRule,
	rule apiextensionsv1.ValidationRule, ruleAct, msgAct *activation, r ratchet, budget *int64) (*field.Error, bool) {
	result, details, err := cr.program.ContextEval(ctx, ruleAct)
	if details == nil {
		return field.InternalError(fld, fmt.Errorf("runtime cost could not be calculated for validation rule: %v, no further validation rules will be run", ruleErrorString(rule))), true
	}
	cost := details.ActualCost()
	if cost == nil {
		return field.Invalid(fld, s.Type, fmt.Sprintf("runtime cost could not be calculated for validation rule: %v, no further validation rules will be run", ruleErrorString(rule))), true
	}
	if *cost > math.MaxInt64 || int64(*cost) > *budget {
		return field.Invalid(fld, s.Type, outOfBudget), true
	}
	*budget -= int64(*cost)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.HasPrefix(msg, "no such overload"):
			// The checker catches most of these; int-or-string values are
			// dynamic and get here.
			return field.Invalid(fld, s.Type, fmt.Sprintf("'%v': call arguments did not match a supported operator, function or macro signature for rule: %v", err, ruleErrorString(rule))), false
		case strings.HasPrefix(msg, "operation cancelled: actual cost limit exceeded"):
			return field.Invalid(fld, s.Type, fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", err, ruleErrorString(rule))), true
		}
		return field.Invalid(fld, s.Type, fmt.Sprintf("%v evaluating rule: %v", err, ruleErrorString(rule))), false
	}
	if result == types.True {
		return nil, false
	}

	path := fld
	if cr.fieldPath != "" {
		path = path.Child(cr.fieldPath)
	}
	ratcheted := !cr.usesOldSelf && r.shouldRatchet()
	keep := func(e *field.Error) *field.Error {
		if ratcheted {
			return nil
		}
		return e
	}
	detail := ""
	if cr.message != nil {
		msg, remaining, msgErr := evalMessageExpression(ctx, cr.message, rule.MessageExpression, msgAct, *budget)
		switch {
		case msgErr == nil:
			detail, *budget = msg, remaining
		case msgErr.stop && msgErr.internal:
			return keep(field.InternalError(path, msgErr)), true
		case msgErr.stop:
			return keep(field.Invalid(path, s.Type, msgErr.Error())), true
		default:
			// A message expression that fails falls back to the message.
			*budget = remaining
		}
	}
	if detail == "" {
		detail = ruleMessageOrDefault(rule)
	}
	var value any = obj
	if s.Type == "object" || s.Type == "array" {
		value = field.OmitValueType{}
	}
	return keep(fieldErrorForReason(path, value, detail, rule.Reason)), false
}

// messageError is why a messageExpression gave no message; stop means no
// further rules run.
type messageError struct {
	internal, stop bool
	detail         string
}

func (e *messageError) Error() string { return e.detail }

func evalMessageExpression(ctx context.Context, prog cel.Program, src string, act *activation, budget int64) (string, int64, *messageError) {
	result, details, err := prog.ContextEval(ctx, act)
	if details == nil || details.ActualCost() == nil {
		return "", -1, &messageError{internal: true, stop: true, detail: fmt.Sprintf("runtime cost could not be calculated for messageExpression: %q", src)}
	}
	cost := *details.ActualCost()
	if cost > math.MaxInt64 || int64(cost) > budget {
		return "", -1, &messageError{stop: true, detail: "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"}
	}
	remaining := budget - int64(cost)
	if err != nil {
		if strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
			return "", -1, &messageError{stop: true, detail: fmt.Sprintf("no further validation rules will be run due to call cost exceeds limit for messageExpression: %q", src)}
		}
		return "", remaining, &messageError{detail: fmt.Sprintf("messageExpression evaluation failed due to: %v", err)}
	}
	msg, ok := result.Value().(string)
	if !ok {
		return "", remaining, &messageError{detail: "messageExpression failed to convert to string"}
	}
	msg = strings.TrimSpace(msg)
	switch {
	case len(msg) > MaxEvaluatedMessageExpressionSizeBytes:
		return "", remaining, &messageError{detail: fmt.Sprintf("messageExpression beyond allowable length of %d", MaxEvaluatedMessageExpressionSizeBytes)}
	case strings.Contains(msg, "\n"):
		return "", remaining, &messageError{detail: "messageExpression should not contain line breaks"}
	case msg == "":
		return "", remaining, &messageError{detail: "messageExpression should evaluate to a non-empty string"}
	}
	return msg, remaining, nil
}

func fieldErrorForReason(fld *field.Path, value any, detail string, reason *apiextensionsv1.FieldValueErrorReason) *field.Error {
	if reason == nil {
		return field.Invalid(fld, value, detail)
	}
	switch *reason {
	case apiextensionsv1.FieldValueForbidden:
		return field.Forbidden(fld, detail)
	case apiextensionsv1.FieldValueRequired:
		return field.Required(fld, detail)
	case apiextensionsv1.FieldValueDuplicate:
		return field.Duplicate(fld, value)
	}
	return field.Invalid(fld, value, detail)
}

func ruleMessageOrDefault(rule apiextensionsv1.ValidationRule) string {
	if rule.Message == "" {
		return fmt.Sprintf("failed rule: %s", ruleErrorString(rule))
	}
	return strings.TrimSpace(rule.Message)
}

func ruleErrorString(rule apiextensionsv1.ValidationRule) string {
	if rule.Message != "" {
		return strings.TrimSpace(rule.Message)
	}
	return strings.TrimSpace(rule.Rule)
}
