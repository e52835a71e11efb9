// Package matchcond compiles and evaluates the CEL matchConditions of
// admission webhooks, as upstream: the variables object, oldObject and
// request, every condition a bool, the webhook called only when none is
// false. Validation uses Compile to refuse a configuration whose
// expressions do not compile; the admission plugin evaluates them.
//
// `authorizer` and `authorizer.requestResource` check the requester's
// permissions (server/cel's authz library) when Vars carries an
// authorizer. Upstream types `request` as AdmissionRequest; here it is
// dynamic.
package matchcond

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/auth"
	skiffcel "skiff/server/cel"
)

// MaxConditions is how many conditions a webhook may have, as upstream.
const MaxConditions = 64

// Vars are the values a condition sees: unstructured objects (nil when
// absent, as oldObject on create) and the AdmissionRequest as a map.
type Vars struct {
	Object, OldObject map[string]any
	Request           map[string]any
	// Authorizer, when set, binds `authorizer` and
	// `authorizer.requestResource`: checks for User, the latter of
	// Resource (the request's). Unset, conditions using them fail to
	// evaluate and the failure policy decides.
	Authorizer skiffcel.Authorizer
	User       *auth.User
	Resource   skiffcel.RequestResource
}

// Matcher is a webhook's compiled conditions.
type Matcher struct {
	conds []compiled
}

type compiled struct {
	name string
	prog cel.Program
}

func env() (*cel.Env, error) {
	return skiffcel.NewEnv(nil, append([]cel.EnvOption{
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType),
	}, skiffcel.AuthorizerDeclarations()...)...)
}

// Compile compiles conds; errors carry fld's paths
// (fld.Index(i).Child("expression")) and upstream's "compilation failed"
// wording.
func Compile(conds []admissionregistrationv1.MatchCondition, fld *field.Path) (*Matcher, field.ErrorList) {
	if len(conds) == 0 {
		return &Matcher{}, nil
	}
	e, err := env()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(fld, err)}
	}
	var errs field.ErrorList
	m := &Matcher{}
	for i, c := range conds {
		p := fld.Index(i).Child("expression")
		expr := strings.TrimSpace(c.Expression)
		if expr == "" {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		ast, iss := e.Compile(expr)
		if iss.Err() != nil {
			errs = append(errs, field.Invalid(p, c.Expression, "compilation failed: "+iss.Err().Error()))
			continue
		}
		if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
			errs = append(errs, field.Invalid(p, c.Expression, fmt.Sprintf("must evaluate to bool but got %v", ast.OutputType())))
			continue
		}
		prog, err := e.Program(ast)
		if err != nil {
			errs = append(errs, field.Invalid(p, c.Expression, "program instantiation failed: "+err.Error()))
			continue
		}
		m.conds = append(m.conds, compiled{name: c.Name, prog: prog})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return m, nil
}

// Match evaluates the conditions in order. A false one means no match
// (whatever the errors of others); otherwise errors are returned together
// for the failure policy to decide, as upstream.
func (m *Matcher) Match(ctx context.Context, v Vars) (bool, error) {
	if m == nil || len(m.conds) == 0 {
		return true, nil
	}
	act := map[string]any{"object": nullable(v.Object), "oldObject": nullable(v.OldObject), "request": nullable(v.Request)}
	if v.Authorizer != nil {
		for k, val := range skiffcel.AuthorizerBindings(ctx, v.Authorizer, v.User, v.Resource) {
			act[k] = val
		}
	}
	var errs []error
	for _, c := range m.conds {
		out, _, err := c.prog.ContextEval(ctx, act)
		if err != nil {
			errs = append(errs, fmt.Errorf("matchCondition %q: %w", c.name, err))
			continue
		}
		b, ok := out.(types.Bool)
		if !ok {
			errs = append(errs, fmt.Errorf("matchCondition %q: must evaluate to bool, got %v", c.name, out.Type()))
			continue
		}
		if !b {
			return false, nil
		}
	}
	return true, errors.Join(errs...)
}

// nullable gives CEL null for an absent object, as upstream does.
func nullable(m map[string]any) any {
	if m == nil {
		return types.NullValue
	}
	return m
}
