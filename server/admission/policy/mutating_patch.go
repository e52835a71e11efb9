package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"skiff/server/apiserver"
	skiffcel "skiff/server/cel"
)

// mutator carries one request's object, in its JSON form, through the
// matched mutating policies, and writes the result back into the request.
type mutator struct {
	r    *run
	a    apiserver.AdmissionAttributes
	orig map[string]any
	obj  map[string]any
	err  error // the object has no JSON form
}

func newMutator(r *run, a apiserver.AdmissionAttributes) *mutator {
	mu := &mutator{r: r, a: a}
	switch v := toValue(a.Object, r.attrs.gvk).(type) {
	case map[string]any:
		mu.orig, mu.obj = v, v
	default:
		mu.err = fmt.Errorf("cannot read the object: %v", v)
	}
	return mu
}

// mutate runs the invocations in order, as upstream's dispatcher; on the
// chain's reinvocation pass only the IfNeeded ones run is due. It returns
// the policy errors.
func (mu *mutator) mutate(invs []invocation, run *apiserver.Hooks) []policyError {
	if mu.err != nil {
		return nil // commit reports it
	}
	again := mu.a.Reinvocation.IsReinvoke()
	var perrs []policyError
	patched := false
	for _, inv := range invs {
		before := mu.obj
		due := !again || run.Due(inv.key)
		matched, applied, err := mu.invoke(inv, due)
		if err != nil {
			perrs = append(perrs, policyError{policy: inv.policy, binding: inv.binding.Name, err: err})
		}
		if !matched || !due {
			continue
		}
		patched = patched || applied
		if !reflect.DeepEqual(before, mu.obj) {
			run.Changed()
			mu.a.Reinvocation.SetShouldReinvoke()
		}
		if inv.policy.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			run.Invoked(inv.key)
		}
	}
	if patched {
		// As upstream: a pass that applied any patch left its versioned
		// object dirty, which makes every IfNeeded invocation run so far
		// due and asks for the reinvocation pass.
		run.Changed()
		mu.a.Reinvocation.SetShouldReinvoke()
	}
	return perrs
}

// invoke evaluates one invocation's match conditions and, when they hold
// and it is due, its mutations in order, each seeing the object as the
// ones before it left it. It tells whether the conditions held and
// whether any patch applied.
func (mu *mutator) invoke(inv invocation, due bool) (matched, applied bool, err error) {
	base := mu.r.baseVars()
	vars := make(map[string]any, len(base)+3)
	for k, v := range base {
		vars[k] = v
	}
	vars[varObject] = mu.obj
	vars[varNamespace] = mu.r.ns.val
	if inv.policy.Spec.ParamKind != nil {
		vars[varParams] = inv.param
	}
	var variables []namedProgram
	if len(inv.policy.Spec.Variables) > 0 {
		variables = inv.cp.variables
	}
	e := newEvaluation(mu.r.ctx, vars, variables)
	for _, mc := range inv.cp.matchConditions {
		val, err := e.run(mc.prog)
		if err != nil {
			return false, false, fmt.Errorf("failed to evaluate matchCondition %q: %w", mc.name, err)
		}
		if val != types.True {
			return false, false, nil
		}
	}
	if !due {
		return true, false, nil
	}
	for _, m := range inv.cp.mutations {
		e.budget = runtimeCostBudget // each mutation has its own budget, as upstream
		val, err := e.run(m.prog)
		if err != nil {
			return true, applied, err
		}
		next, err := mu.patch(m.patchType, val)
		if err != nil {
			return true, applied, err
		}
		mu.obj, applied = next, true
		vars[varObject] = next
	}
	return true, applied, nil
}

func (mu *mutator) patch(pt admissionregistrationv1.PatchType, val ref.Val) (map[string]any, error) {
	switch pt {
	case admissionregistrationv1.PatchTypeApplyConfiguration:
		var tc managedfields.TypeConverter
		if mu.a.ApplyTypes != nil {
			tc = mu.a.ApplyTypes()
		}
		if tc == nil {
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("Resource kind %s not found. There can be a delay between when CustomResourceDefinitions are created and when they are available.", mu.r.attrs.gvk))
		}
		return applyConfiguration(tc, mu.obj, val)
	case admissionregistrationv1.PatchTypeJSONPatch:
		return applyJSONPatch(mu.obj, val)
	}
	return nil, fmt.Errorf("unsupported patch type %q", pt)
}

// commit writes a changed object back into the request, pruned and
// defaulted as a mutating webhook's result is.
func (mu *mutator) commit() error {
	if mu.err != nil {
		return apierrors.NewInternalError(mu.err)
	}
	if reflect.DeepEqual(mu.orig, mu.obj) {
		return nil
	}
	if err := replaceObject(mu.a.Object, mu.obj); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("mutating admission policy result cannot be decoded: %w", err))
	}
	if res := mu.a.Resource; mu.a.Subresource == "" {
		if res.Prune != nil {
			res.Prune(mu.a.Object)
		}
		if res.Default != nil {
			res.Default(mu.a.Object)
		}
	}
	return nil
}

// replaceObject sets obj, in place, to the object m is the JSON form of;
// a typed object keeps the type metadata the server had on it.
func replaceObject(obj runtime.Object, m map[string]any) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.Object = m
		return nil
	}
	v := reflect.ValueOf(obj).Elem()
	fresh := reflect.New(v.Type())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, fresh.Interface()); err != nil {
		return err
	}
	tm := obj.GetObjectKind().GroupVersionKind()
	v.Set(fresh.Elem())
	obj.GetObjectKind().SetGroupVersionKind(tm)
	return nil
}

// applyConfiguration merges an ApplyConfiguration expression's result
// into obj by the resource's schema, as server-side apply merges, after
// refusing one that sets atomic lists, maps or structs (they would be
// replaced whole, dropping what the configuration does not name).
func applyConfiguration(tc managedfields.TypeConverter, obj map[string]any, val ref.Val) (map[string]any, error) {
	ov, ok := val.(*skiffcel.ObjectVal)
	if !ok {
		return nil, fmt.Errorf("unsupported return type from ApplyConfiguration expression: %v", val.Type())
	}
	if err := ov.CheckTypeNames(); err != nil {
		return nil, fmt.Errorf("type mismatch: %w", err)
	}
	pm, err := ov.ConvertToNative(reflect.TypeFor[map[string]any]())
	if err != nil {
		return nil, fmt.Errorf("invalid ApplyConfiguration: %w", err)
	}
	patch := &unstructured.Unstructured{Object: pm.(map[string]any)}
	live := &unstructured.Unstructured{Object: obj}
	patch.SetGroupVersionKind(live.GroupVersionKind())
	patchTyped, err := tc.ObjectToTyped(patch)
	if err != nil {
		return nil, fmt.Errorf("error applying patch: failed to convert patch object to typed object: %w", err)
	}
	if atomics := atomicPaths("", patchTyped.Schema(), patchTyped.TypeRef(), patchTyped.AsValue()); len(atomics) > 0 {
		return nil, fmt.Errorf("error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: %v", strings.Join(atomics, ", "))
	}
	liveTyped, err := tc.ObjectToTyped(live, typed.AllowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("error applying patch: failed to convert original object to typed object: %w", err)
	}
	merged, err := liveTyped.Merge(patchTyped)
	if err != nil {
		return nil, fmt.Errorf("error applying patch: failed to merge patch: %w", err)
	}
	out, err := tc.TypedToObject(merged)
	if err != nil {
		return nil, fmt.Errorf("error applying patch: failed to convert typed object to object: %w", err)
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("error applying patch: merged object is a %T", out)
	}
	return u.Object, nil
}

// atomicPaths lists where v sets a list, map or struct its schema marks
// atomic.
func atomicPaths(path string, s *schema.Schema, tr schema.TypeRef, v value.Value) []string {
	a, ok := s.Resolve(tr)
	if !ok {
		return nil
	}
	var out []string
	switch {
	case v.IsMap() && a.Map != nil:
		if a.Map.ElementRelationship == schema.Atomic {
			out = append(out, displayPath(path))
		}
		v.AsMap().Iterate(func(key string, child value.Value) bool {
			if f, ok := a.Map.FindField(key); ok {
				out = append(out, atomicPaths(path+"."+key, s, f.Type, child)...)
			} else if a.Map.ElementType.NamedType != nil || a.Map.ElementType.Inlined != (schema.Atom{}) {
				out = append(out, atomicPaths(path+"["+strconv.Quote(key)+"]", s, a.Map.ElementType, child)...)
			}
			return true
		})
	case v.IsList() && a.List != nil:
		if a.List.ElementRelationship == schema.Atomic {
			out = append(out, displayPath(path))
		}
		l := v.AsList()
		for i := 0; i < l.Length(); i++ {
			out = append(out, atomicPaths(fmt.Sprintf("%s[%d]", path, i), s, a.List.ElementType, l.At(i))...)
		}
	}
	return out
}

func displayPath(p string) string {
	if p == "" {
		return "<root>"
	}
	return strings.TrimPrefix(p, ".")
}

// applyJSONPatch applies a JSONPatch expression's result to obj. A failed
// `test` operation leaves the object as it was, as upstream.
func applyJSONPatch(obj map[string]any, val ref.Val) (map[string]any, error) {
	l, ok := val.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("type mismatch: JSONPatchType.expression should evaluate to array")
	}
	var ops jsonpatch.Patch
	for it := l.Iterator(); it.HasNext() == types.True; {
		op, err := jsonPatchOperation(it.Next())
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("JSON Patch: %w", err)
	}
	patched, err := ops.Apply(doc)
	if errors.Is(err, jsonpatch.ErrTestFailed) {
		return obj, nil
	}
	if err != nil {
		return nil, fmt.Errorf("JSON Patch: %w", err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(patched, &out); err != nil {
		return nil, fmt.Errorf("JSON Patch: %w", err)
	}
	return out, nil
}

func jsonPatchOperation(v ref.Val) (jsonpatch.Operation, error) {
	p, ok := v.(*skiffcel.JSONPatchVal)
	if !ok {
		return nil, fmt.Errorf("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of %s", v.Type().TypeName())
	}
	raw := func(s string) *json.RawMessage {
		m := json.RawMessage(strconv.Quote(s))
		return &m
	}
	op := jsonpatch.Operation{"op": raw(p.Op), "path": raw(p.Path)}
	if p.From != "" {
		op["from"] = raw(p.From)
	}
	if p.Val != nil {
		if ov, ok := p.Val.(*skiffcel.ObjectVal); ok {
			if err := ov.CheckTypeNames(); err != nil {
				return nil, fmt.Errorf("type mismatch: %w", err)
			}
		}
		n, err := skiffcel.JSONValue(p.Val)
		if err != nil {
			return nil, fmt.Errorf("JSONPath valueExpression evaluated to a type that could not marshal to JSON: %w", err)
		}
		b, err := json.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("JSONPath valueExpression evaluated to a type that could not marshal to JSON: %w", err)
		}
		m := json.RawMessage(b)
		op["value"] = &m
	}
	return op, nil
}
