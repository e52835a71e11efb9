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

// The variables every policy expression may use, as upstream names them.
// authorizer and authorizer.requestResource are not declared: expressions
// that use them do not compile here.
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
// vars (nil: `variables` is not declared, as upstream without variables).
func newEnv(hasParams bool, vars []variableField) (*cel.Env, error) {
	opts := envOptions(hasParams)
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

// compileSpec compiles every expression of spec and returns the programs
// and every compile error.
func compileSpec(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, specPath *field.Path) (*compiledPolicy, []*compileError) {
	hasParams := spec.ParamKind != nil
	out := &compiledPolicy{}
	var errs []*compileError
	fail := func(e *compileError) { errs = append(errs, e) }

	if len(spec.MatchConditions) > 0 {
		env, err := newEnv(hasParams, nil)
		if err != nil {
			return nil, []*compileError{{path: specPath, detail: err.Error()}}
		}
		for i, mc := range spec.MatchConditions {
			if strings.TrimSpace(mc.Expression) == "" {
				continue
			}
			prog, _, cerr := compileExpr(env, mc.Expression, specPath.Child("matchConditions").Index(i).Child("expression"), cel.BoolType)
			if cerr != nil {
				fail(cerr)
				continue
			}
			out.matchConditions = append(out.matchConditions, namedProgram{name: mc.Name, prog: prog})
		}
	}
	// Each variable sees those declared before it (upstream's
	// composition); validations see them all.
	var vars []variableField
	if len(spec.Variables) > 0 {
		vars = []variableField{}
	}
	for i, v := range spec.Variables {
		if strings.TrimSpace(v.Expression) == "" {
			vars = append(vars, variableField{name: v.Name, t: cel.DynType})
			out.variables = append(out.variables, namedProgram{name: v.Name})
			continue
		}
		env, err := newEnv(hasParams, vars)
		if err != nil {
			return nil, []*compileError{{path: specPath, detail: err.Error()}}
		}
		prog, t, cerr := compileExpr(env, v.Expression, specPath.Child("variables").Index(i).Child("expression"), nil)
		if cerr != nil {
			fail(cerr)
			t = cel.DynType
		}
		vars = append(vars, variableField{name: v.Name, t: t})
		out.variables = append(out.variables, namedProgram{name: v.Name, prog: prog})
	}
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
	// Audit annotations are compiled so that bad ones are refused, but
	// there is no audit log to publish them to.
	for i, a := range spec.AuditAnnotations {
		if strings.TrimSpace(a.ValueExpression) == "" {
			continue
		}
		if _, _, cerr := compileExpr(env, a.ValueExpression, specPath.Child("auditAnnotations").Index(i).Child("valueExpression"), nil); cerr != nil {
			fail(cerr)
		}
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
