package policy

import (
	"strings"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	skiffcel "skiff/server/cel"
)

// compiledMutation is one mutation's program and how its result patches
// the object.
type compiledMutation struct {
	patchType admissionregistrationv1.PatchType
	prog      cel.Program
}

// compileMutatingSpec compiles every expression of a
// MutatingAdmissionPolicy: its match conditions and variables as a
// validating policy's, and each mutation against the mutation types
// (Object..., JSONPatch, jsonpatch.escapeKey), which variables may use
// too.
func compileMutatingSpec(spec *admissionregistrationv1.MutatingAdmissionPolicySpec, specPath *field.Path) (*compiledPolicy, []*compileError) {
	hasParams := spec.ParamKind != nil
	out := &compiledPolicy{}
	vars, errs, fatal := compileCommon(out, hasParams, spec.MatchConditions, spec.Variables, specPath, skiffcel.MutationTypes())
	if fatal != nil {
		return nil, []*compileError{fatal}
	}
	env, err := newEnv(hasParams, vars, skiffcel.MutationTypes())
	if err != nil {
		return nil, []*compileError{{path: specPath, detail: err.Error()}}
	}
	for i, m := range spec.Mutations {
		p := specPath.Child("mutations").Index(i)
		cm := compiledMutation{patchType: m.PatchType}
		var expr string
		var want *cel.Type
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			expr, want, p = m.ApplyConfiguration.Expression, skiffcel.ObjectType, p.Child("applyConfiguration", "expression")
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			expr, want, p = m.JSONPatch.Expression, cel.ListType(skiffcel.JSONPatchType), p.Child("jsonPatch", "expression")
		}
		if strings.TrimSpace(expr) != "" {
			prog, _, cerr := compileExpr(env, strings.TrimSpace(expr), p, want)
			if cerr != nil {
				errs = append(errs, cerr)
			}
			cm.prog = prog
		}
		out.mutations = append(out.mutations, cm)
	}
	if len(errs) > 0 {
		out.err = errs[0]
	}
	return out, errs
}

// CompileMutatingErrors compiles the expressions of a mutating policy spec
// as a write does and reports the ones that do not compile under their
// field paths.
func CompileMutatingErrors(spec *admissionregistrationv1.MutatingAdmissionPolicySpec, specPath *field.Path) field.ErrorList {
	_, errs := compileMutatingSpec(spec, specPath)
	var out field.ErrorList
	for _, e := range errs {
		out = append(out, e.fieldError())
	}
	return out
}
