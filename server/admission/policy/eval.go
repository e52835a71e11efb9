package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// errOutOfBudget ends an evaluation whose expressions together cost more
// than runtimeCostBudget.
var errOutOfBudget = errors.New("validation failed due to running out of cost budget, no further validation rules will be run")

// evaluation is the state of evaluating one policy for one binding and
// one param: the activation, the lazily computed variables and what is
// left of the cost budget.
type evaluation struct {
	ctx    context.Context
	vars   map[string]any // object, oldObject, request, params, namespaceObject
	lazy   *lazyVariables
	budget int64
}

func newEvaluation(ctx context.Context, vars map[string]any, variables []namedProgram) *evaluation {
	e := &evaluation{ctx: ctx, vars: vars, budget: runtimeCostBudget}
	if variables != nil {
		e.lazy = &lazyVariables{eval: e, progs: variables, done: map[string]ref.Val{}}
	}
	return e
}

// ResolveName implements interpreter.Activation.
func (e *evaluation) ResolveName(name string) (any, bool) {
	if name == varVariables {
		if e.lazy == nil {
			return nil, false
		}
		return e.lazy, true
	}
	v, ok := e.vars[name]
	return v, ok
}

// Parent implements interpreter.Activation.
func (e *evaluation) Parent() interpreter.Activation { return nil }

// run evaluates prog, charging its cost to the budget.
func (e *evaluation) run(prog cel.Program) (ref.Val, error) {
	if e.budget <= 0 {
		return nil, errOutOfBudget
	}
	val, det, err := prog.ContextEval(e.ctx, e)
	if det != nil && det.ActualCost() != nil {
		e.budget -= int64(*det.ActualCost())
		if e.budget < 0 {
			return nil, errOutOfBudget
		}
	}
	if err != nil {
		return nil, err
	}
	return val, nil
}

// lazyVariables is the `variables` value: each variable is evaluated the
// first time an expression reads it, once per evaluation, as upstream.
type lazyVariables struct {
	eval  *evaluation
	progs []namedProgram
	done  map[string]ref.Val
}

func (l *lazyVariables) get(name string) (ref.Val, bool) {
	if v, ok := l.done[name]; ok {
		return v, true
	}
	for _, p := range l.progs {
		if p.name != name {
			continue
		}
		if p.prog == nil {
			return types.NewErr("composited variable %q fails to compile", name), true
		}
		v, err := l.eval.run(p.prog)
		if err != nil {
			v = types.NewErr("composited variable %q fails to evaluate: %v", name, err)
		}
		l.done[name] = v
		return v, true
	}
	return nil, false
}

func (l *lazyVariables) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	return l.get(string(k))
}

func (l *lazyVariables) Get(key ref.Val) ref.Val {
	if v, ok := l.Find(key); ok {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

func (l *lazyVariables) Contains(key ref.Val) ref.Val {
	_, ok := l.Find(key)
	return types.Bool(ok)
}

func (l *lazyVariables) Size() ref.Val { return types.Int(len(l.progs)) }

func (l *lazyVariables) Iterator() traits.Iterator {
	names := make([]ref.Val, len(l.progs))
	for i, p := range l.progs {
		names[i] = types.String(p.name)
	}
	return types.NewRefValList(types.DefaultTypeAdapter, names).(traits.Lister).Iterator()
}

func (l *lazyVariables) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("variables cannot be converted to a native value")
}

func (l *lazyVariables) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return types.MapType
	}
	return types.NewErr("variables cannot be converted to %v", t)
}

func (l *lazyVariables) Equal(other ref.Val) ref.Val { return types.Bool(l == other) }
func (l *lazyVariables) Type() ref.Type              { return types.MapType }
func (l *lazyVariables) Value() any                  { return l }

var _ traits.Mapper = (*lazyVariables)(nil)
