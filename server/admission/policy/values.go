package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// maxMessageBytes is upstream's MaxEvaluatedMessageExpressionSizeBytes.
const maxMessageBytes = 5 * 1024

// decision is one failed validation.
type decision struct {
	message string
	reason  metav1.StatusReason
	// index is the validation's, for the audit annotation (audit.go).
	index int
	// deny refuses whatever the binding's actions: a failed audit
	// annotation under failurePolicy Fail, as upstream.
	deny bool
}

// evaluate runs a policy's match conditions and validations against one
// param (nil without paramKind or paramRef) and returns the failures:
// false validations, and evaluation errors unless failurePolicy is Ignore.
func (r *run) evaluate(pol *admissionregistrationv1.ValidatingAdmissionPolicy, cp *compiledPolicy, param, ns any) []decision {
	ignoreErrors := failurePolicy(pol) == admissionregistrationv1.Ignore
	idx := 0 // the validation being evaluated
	failed := func(err error) []decision {
		if ignoreErrors {
			return nil
		}
		return []decision{{message: err.Error(), index: idx}}
	}
	vars := r.baseVars()
	ev := map[string]any{varNamespace: ns}
	for k, v := range vars {
		ev[k] = v
	}
	if pol.Spec.ParamKind != nil {
		ev[varParams] = param
	}
	e := newEvaluation(r.ctx, ev, variablesOrNil(pol, cp))
	for _, mc := range cp.matchConditions {
		val, err := e.run(mc.prog)
		if err != nil {
			return failed(fmt.Errorf("failed to evaluate matchCondition %q: %w", mc.name, err))
		}
		if val != types.True {
			return nil // not selected: no validation applies
		}
	}
	var out []decision
	for i, v := range cp.validations {
		idx = i
		val, err := e.run(v.prog)
		if err != nil {
			out = append(out, failed(err)...)
			if errors.Is(err, errOutOfBudget) {
				return out
			}
			continue
		}
		if val == types.True {
			continue
		}
		d := decision{message: r.message(e, v), reason: metav1.StatusReasonInvalid, index: i}
		if v.spec.Reason != nil {
			d.reason = *v.spec.Reason
		}
		out = append(out, d)
	}
	return append(out, r.auditAnnotations(pol, cp, ev)...) // audit.go
}

func variablesOrNil(pol *admissionregistrationv1.ValidatingAdmissionPolicy, cp *compiledPolicy) []namedProgram {
	if len(pol.Spec.Variables) == 0 {
		return nil
	}
	return cp.variables
}

// message is the messageExpression's result when it gives a one-line
// string of at most 5 KiB, else the static message.
func (r *run) message(e *evaluation, v compiledValidation) string {
	if v.message != nil {
		if val, err := e.run(v.message); err == nil {
			if s, ok := val.Value().(string); ok {
				s = strings.TrimSpace(s)
				if s != "" && len(s) <= maxMessageBytes && !strings.Contains(s, "\n") {
					return s
				}
			}
		}
	}
	return staticMessage(v.spec)
}

// baseVars are object, oldObject, request and the authorizer variables,
// computed once per request.
func (r *run) baseVars() map[string]any {
	if r.baseVar != nil {
		return r.baseVar
	}
	a := r.attrs
	r.baseVar = map[string]any{
		varObject:    toValue(a.obj, a.gvk),
		varOldObject: toValue(a.old, a.gvk),
		varRequest:   r.requestValue(),
	}
	r.addAuthorizer(r.baseVar)
	return r.baseVar
}

// requestValue is upstream's AdmissionRequest as CEL sees it.
func (r *run) requestValue() map[string]any {
	a := r.attrs
	kind := map[string]any{"group": a.gvk.Group, "version": a.gvk.Version, "kind": a.gvk.Kind}
	resource := map[string]any{"group": a.gvr.Group, "version": a.gvr.Version, "resource": a.gvr.Resource}
	user := map[string]any{"username": "", "uid": "", "groups": []any{}, "extra": map[string]any{}}
	if u := r.a.User; u != nil {
		groups := make([]any, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = g
		}
		extra := map[string]any{}
		for k, vs := range u.Extra {
			l := make([]any, len(vs))
			for i, v := range vs {
				l[i] = v
			}
			extra[k] = l
		}
		user = map[string]any{"username": u.Name, "uid": u.UID, "groups": groups, "extra": extra}
	}
	return map[string]any{
		"uid": string(uuid.NewUUID()), "kind": kind, "resource": resource, "subResource": a.subresource,
		"requestKind": kind, "requestResource": resource, "requestSubResource": a.subresource,
		"name": a.name, "namespace": a.namespace, "operation": string(a.op), "userInfo": user,
		"dryRun": r.a.DryRun, "options": nil,
	}
}

// namespaceObject is the request's namespace with the fields upstream
// exposes (null for cluster-scoped objects and namespaces themselves).
func (r *run) namespaceObject() (any, error) {
	if r.ns.loaded {
		return r.ns.val, r.ns.err
	}
	r.ns.loaded = true
	r.ns.val = types.NullValue
	if r.attrs.namespace == "" || r.attrs.isNamespace() {
		return r.ns.val, nil
	}
	ns, err := r.p.lookups.Namespace(r.ctx, r.attrs.namespace)
	if err != nil {
		r.ns.err = err
		return nil, err
	}
	if ns == nil {
		return r.ns.val, nil
	}
	trimmed := &corev1.Namespace{Spec: ns.Spec, Status: ns.Status, ObjectMeta: metav1.ObjectMeta{
		Name: ns.Name, GenerateName: ns.GenerateName, UID: ns.UID, ResourceVersion: ns.ResourceVersion,
		Generation: ns.Generation, CreationTimestamp: ns.CreationTimestamp, DeletionTimestamp: ns.DeletionTimestamp,
		DeletionGracePeriodSeconds: ns.DeletionGracePeriodSeconds, Labels: ns.Labels, Annotations: ns.Annotations,
		Finalizers: ns.Finalizers}}
	r.ns.val = toValue(trimmed, corev1.SchemeGroupVersion.WithKind("Namespace"))
	return r.ns.val, nil
}

// toValue is an object as CEL sees it: its JSON form (apiVersion and kind
// included), or null.
func toValue(obj runtime.Object, gvk schema.GroupVersionKind) any {
	if obj == nil {
		return types.NullValue
	}
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = u.Object
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return types.NewErr("cannot convert %T: %v", obj, err)
		}
	}
	if _, ok := m["apiVersion"]; !ok || m["kind"] == nil {
		withType := make(map[string]any, len(m)+2)
		for k, v := range m {
			withType[k] = v
		}
		withType["apiVersion"], withType["kind"] = gvk.GroupVersion().String(), gvk.Kind
		m = withType
	}
	return m
}

func metaAccessor(obj runtime.Object) (metav1.Object, error) { return meta.Accessor(obj) }

// params are the objects a binding's paramRef selects, as upstream's
// CollectParams: [nil] without paramKind or paramRef.
func (r *run) params(pk *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef) ([]any, error) {
	if pk == nil || ref == nil {
		return []any{types.NullValue}, nil
	}
	gv, err := schema.ParseGroupVersion(pk.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("paramKind kind `%v` not known", pk.String())
	}
	gvk := gv.WithKind(pk.Kind)
	namespaced, ok := r.p.lookups.ParamScope(gvk)
	if !ok {
		return nil, fmt.Errorf("paramKind kind `%v` not known", pk.String())
	}
	namespace := ""
	if namespaced {
		namespace = ref.Namespace
		if namespace == "" {
			namespace = r.attrs.namespace
		}
		if namespace == "" {
			return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	} else if ref.Namespace != "" {
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	var objs []runtime.Object
	switch {
	case ref.Name != "":
		if ref.Selector != nil {
			return nil, errors.New("paramRef.name and paramRef.selector are mutually exclusive")
		}
		obj, err := r.p.lookups.GetParam(r.ctx, gvk, namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	case ref.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		if objs, err = r.p.lookups.ListParams(r.ctx, gvk, namespace, sel); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("one of name or selector must be provided")
	}
	if len(objs) == 0 && ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction {
		return nil, errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")
	}
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = toValue(o, gvk)
	}
	return out, nil
}
