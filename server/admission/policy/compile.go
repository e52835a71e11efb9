package policy

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	skiffcel "skiff/server/cel"
)

// The variables every policy expression may use, as upstream names them
// (authorizer and authorizer.requestResource too: authz.go).
const (
	varObject    = "object"
	varOldObject = "oldObject"
	varRequest   = "request"
	varParams    = "params"
	varNamespace = "namespaceObject"
	varVariables = "variables"
)

// runtimeCostBudget is upstream's RuntimeCELCostBudget: what all the
// expressions of one policy evaluation (one binding, one param) may cost.
const runtimeCostBudget = 10_000_000

// compiledPolicy holds one policy generation's programs.
type compiledPolicy struct {
	matchConditions []namedProgram
	variables       []namedProgram
	validations     []compiledValidation
	mutations       []compiledMutation // a MutatingAdmissionPolicy's
	// auditAnnotations are named by their keys (audit.go).
	auditAnnotations []namedProgram
	// err is the first expression that does not compile: the policy is
	// misconfigured and its failurePolicy decides every matching request.
	err error
}

type namedProgram struct {
	name string
	prog cel.Program
}

type compiledValidation struct {
	spec    admissionregistrationv1.Validation
	prog    cel.Program
	message cel.Program // nil without messageExpression
}

// compileError is a compile failure of one expression, with its path.
type compileError struct {
	path   *field.Path
	expr   string
	detail string
}

func (e *compileError) Error() string {
	return fmt.Sprintf("%s: %s", e.path, e.detail)
}

func (e *compileError) fieldError() *field.Error {
	return field.Invalid(e.path, e.expr, e.detail)
}

// envOptions declares the request variables; params only when the policy
// has a paramKind, as upstream.
func envOptions(hasParams bool) []cel.EnvOption {
	opts := []cel.EnvOption{
		cel.Variable(varObject, cel.DynType),
		cel.Variable(varOldObject, cel.DynType),
		cel.Variable(varRequest, cel.DynType),
		cel.Variable(varNamespace, cel.DynType),
	}
	opts = append(opts, authorizerEnvOptions()...)
	if hasParams {
		opts = append(opts, cel.Variable(varParams, cel.DynType))
	}
	return opts
}

// variableFields are the compiled variables' names and CEL result types,
// in declaration order: what `variables` declares.
type variableField struct {
	name string
	t    *cel.Type
}

// newEnv builds the environment of a policy's expressions that may see
// vars (nil: `variables` is not declared, as upstream without variables),
// extended by extra.
func newEnv(hasParams bool, vars []variableField, extra ...cel.EnvOption) (*cel.Env, error) {
	opts := append(envOptions(hasParams), extra...)
	if vars == nil {
		return skiffcel.NewEnv(nil, opts...)
	}
	props := make(map[string]apiextensionsv1.JSONSchemaProps, len(vars))
	for _, v := range vars {
		props[v.name] = schemaOf(v.t)
	}
	dt := skiffcel.SchemaDeclType(&apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}, false)
	if dt == nil {
		return nil, fmt.Errorf("cannot declare the variables")
	}
	dt = dt.MaybeAssignTypeName("kubernetes.variables")
	return skiffcel.NewEnv([]*skiffcel.DeclType{dt}, append(opts, cel.Variable(varVariables, dt.CelType()))...)
}

// schemaOf gives a variable's result type a schema whose CEL type is the
// same for scalars; everything else is dynamically typed, so selections on
// it are checked when evaluated.
func schemaOf(t *cel.Type) apiextensionsv1.JSONSchemaProps {
	switch {
	case t.IsExactType(cel.BoolType):
		return apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	case t.IsExactType(cel.IntType):
		return apiextensionsv1.JSONSchemaProps{Type: "integer"}
	case t.IsExactType(cel.DoubleType):
		return apiextensionsv1.JSONSchemaProps{Type: "number"}
	case t.IsExactType(cel.StringType):
		return apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	return apiextensionsv1.JSONSchemaProps{XIntOrString: true}
}

// compileExpr compiles one expression that must have one of want types
// (nil: any), with upstream's messages.
func compileExpr(env *cel.Env, expr string, path *field.Path, want *cel.Type) (cel.Program, *cel.Type, *compileError) {
	ast, issues := env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, nil, &compileError{path: path, expr: expr, detail: "compilation failed: " + issues.String()}
	}
	if want != nil && !ast.OutputType().IsExactType(want) {
		return nil, nil, &compileError{path: path, expr: expr, detail: fmt.Sprintf("must evaluate to %v but got %v", want, ast.OutputType())}
	}
	prog, err := env.Program(ast, cel.InterruptCheckFrequency(skiffcel.CheckFrequency))
	if err != nil {
		return nil, nil, &compileError{path: path, expr: expr, detail: "program instantiation failed: " + err.Error()}
	}
	return prog, ast.OutputType(), nil
}

// compileCommon compiles what validating and mutating policies share:
// matchConditions and variables, into out. It returns the variables'
// types for the expressions after them, the compile errors, and a fatal
// error when no environment could be built. extra extends the variables'
// environment (mutating policies' types).
func compileCommon(out *compiledPolicy, hasParams bool, mcs []admissionregistrationv1.MatchCondition, variables []admissionregistrationv1.Variable, specPath *field.Path, extra ...cel.EnvOption) ([]variableField, []*compileError, *compileError) {
	var errs []*compileError
	if len(mcs) > 0 {
		env, err := newEnv(hasParams, nil)
		if err != nil {
			return nil, nil, &compileError{path: specPath, detail: err.Error()}
		}
		for i, mc := range mcs {
			if strings.TrimSpace(mc.Expression) == "" {
				continue
			}
			prog, _, cerr := compileExpr(env, mc.Expression, specPath.Child("matchConditions").Index(i).Child("expression"), cel.BoolType)
			if cerr != nil {
				errs = append(errs, cerr)
				continue
			}
			out.matchConditions = append(out.matchConditions, namedProgram{name: mc.Name, prog: prog})
		}
	}
	// Each variable sees those declared before it (upstream's
	// composition); the expressions after them see them all.
	var vars []variableField
	if len(variables) > 0 {
		vars = []variableField{}
	}
	for i, v := range variables {
		if strings.TrimSpace(v.Expression) == "" {
			vars = append(vars, variableField{name: v.Name, t: cel.DynType})
			out.variables = append(out.variables, namedProgram{name: v.Name})
			continue
		}
		env, err := newEnv(hasParams, vars, extra...)
		if err != nil {
			return nil, nil, &compileError{path: specPath, detail: err.Error()}
		}
		prog, t, cerr := compileExpr(env, v.Expression, specPath.Child("variables").Index(i).Child("expression"), nil)
		if cerr != nil {
			errs = append(errs, cerr)
			t = cel.DynType
		}
		vars = append(vars, variableField{name: v.Name, t: t})
		out.variables = append(out.variables, namedProgram{name: v.Name, prog: prog})
	}
	return vars, errs, nil
}

// compileSpec compiles every expression of spec and returns the programs
// and every compile error.
func compileSpec(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, specPath *field.Path) (*compiledPolicy, []*compileError) {
	hasParams := spec.ParamKind != nil
	out := &compiledPolicy{}
	vars, errs, fatal := compileCommon(out, hasParams, spec.MatchConditions, spec.Variables, specPath)
	if fatal != nil {
		return nil, []*compileError{fatal}
	}
	fail := func(e *compileError) { errs = append(errs, e) }
	env, err := newEnv(hasParams, vars)
	if err != nil {
		return nil, []*compileError{{path: specPath, detail: err.Error()}}
	}
	for i, v := range spec.Validations {
		p := specPath.Child("validations").Index(i)
		cv := compiledValidation{spec: v}
		if strings.TrimSpace(v.Expression) != "" {
			prog, _, cerr := compileExpr(env, v.Expression, p.Child("expression"), cel.BoolType)
			if cerr != nil {
				fail(cerr)
			}
			cv.prog = prog
		}
		if strings.TrimSpace(v.MessageExpression) != "" {
			prog, _, cerr := compileExpr(env, v.MessageExpression, p.Child("messageExpression"), cel.StringType)
			if cerr != nil {
				fail(cerr)
			}
			cv.message = prog
		}
		out.validations = append(out.validations, cv)
	}
	// Audit annotations annotate the request's audit event (audit.go).
	for i, a := range spec.AuditAnnotations {
		if strings.TrimSpace(a.ValueExpression) == "" {
			continue
		}
		prog, _, cerr := compileExpr(env, a.ValueExpression, specPath.Child("auditAnnotations").Index(i).Child("valueExpression"), nil)
		if cerr != nil {
			fail(cerr)
			continue
		}
		out.auditAnnotations = append(out.auditAnnotations, namedProgram{name: a.Key, prog: prog})
	}
	if len(errs) > 0 {
		out.err = errs[0]
	}
	return out, errs
}

// CompileErrors compiles the expressions of a policy spec as a write does
// and reports the ones that do not compile under their field paths
// ("spec.validations[0].expression: Invalid value: ...: compilation
// failed: ...").
func CompileErrors(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, specPath *field.Path) field.ErrorList {
	_, errs := compileSpec(spec, specPath)
	var out field.ErrorList
	for _, e := range errs {
		out = append(out, e.fieldError())
	}
	return out
}
