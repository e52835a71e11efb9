package cel

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QuantityType is the CEL type of quantity(...) values.
var QuantityType = cel.ObjectType("kubernetes.Quantity")

// QuantityValue is a resource.Quantity as a CEL value.
type QuantityValue struct{ *resource.Quantity }

func (d QuantityValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(d.Quantity).AssignableTo(typeDesc) {
		return d.Quantity, nil
	}
	if reflect.TypeOf("").AssignableTo(typeDesc) {
		return d.Quantity.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'Quantity' to '%v'", typeDesc)
}

func (d QuantityValue) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case QuantityType.TypeName():
		return d
	case types.TypeType.TypeName():
		return QuantityType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", QuantityType, t)
}

func (d QuantityValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(QuantityValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(d.Quantity.Equal(*o.Quantity))
}

func (d QuantityValue) Type() ref.Type { return QuantityType }
func (d QuantityValue) Value() any     { return d.Quantity }

// Quantity is the Kubernetes quantity library: quantity, isQuantity,
// sign, comparisons, arithmetic and conversions.
func Quantity() cel.EnvOption { return cel.Lib(quantityLib{}) }

type quantityLib struct{}

func (quantityLib) LibraryName() string { return "kubernetes.quantity" }

func quantityArg(v ref.Val) (*resource.Quantity, ref.Val) {
	q, ok := v.Value().(*resource.Quantity)
	if !ok {
		return nil, types.MaybeNoSuchOverloadErr(v)
	}
	return q, nil
}

func quantityUnary(f func(*resource.Quantity) ref.Val) cel.OverloadOpt {
	return cel.UnaryBinding(func(v ref.Val) ref.Val {
		q, e := quantityArg(v)
		if e != nil {
			return e
		}
		return f(q)
	})
}

func quantityBinary(f func(a, b *resource.Quantity) ref.Val) cel.OverloadOpt {
	return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
		qa, e := quantityArg(a)
		if e != nil {
			return e
		}
		qb, e := quantityArg(b)
		if e != nil {
			return e
		}
		return f(qa, qb)
	})
}

func quantityWithInt(f func(a *resource.Quantity, b resource.Quantity) ref.Val) cel.OverloadOpt {
	return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
		qa, e := quantityArg(a)
		if e != nil {
			return e
		}
		i, ok := b.Value().(int64)
		if !ok {
			return types.MaybeNoSuchOverloadErr(b)
		}
		return f(qa, *resource.NewQuantity(i, resource.DecimalExponent))
	})
}

func quantityPlus(a *resource.Quantity, b resource.Quantity) ref.Val {
	c := a.DeepCopy()
	c.Add(b)
	return QuantityValue{Quantity: &c}
}

func quantityMinus(a *resource.Quantity, b resource.Quantity) ref.Val {
	c := a.DeepCopy()
	c.Sub(b)
	return QuantityValue{Quantity: &c}
}

func (quantityLib) CompileOptions() []cel.EnvOption {
	q := QuantityType
	qq := []*cel.Type{q, q}
	return []cel.EnvOption{
		cel.Function("quantity", cel.Overload("string_to_quantity", []*cel.Type{cel.StringType}, q, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			s, ok := arg.Value().(string)
			if !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			parsed, err := resource.ParseQuantity(s)
			if err != nil {
				return types.WrapErr(err)
			}
			return QuantityValue{Quantity: &parsed}
		}))),
		cel.Function("isQuantity", cel.Overload("is_quantity_string", []*cel.Type{cel.StringType}, cel.BoolType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			s, ok := arg.Value().(string)
			if !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			_, err := resource.ParseQuantity(s)
			return types.Bool(err == nil)
		}))),
		cel.Function("sign", cel.Overload("quantity_sign", []*cel.Type{q}, cel.IntType,
			quantityUnary(func(a *resource.Quantity) ref.Val { return types.Int(a.Sign()) }))),
		cel.Function("isGreaterThan", cel.MemberOverload("quantity_is_greater_than", qq, cel.BoolType,
			quantityBinary(func(a, b *resource.Quantity) ref.Val { return types.Bool(a.Cmp(*b) == 1) }))),
		cel.Function("isLessThan", cel.MemberOverload("quantity_is_less_than", qq, cel.BoolType,
			quantityBinary(func(a, b *resource.Quantity) ref.Val { return types.Bool(a.Cmp(*b) == -1) }))),
		cel.Function("compareTo", cel.MemberOverload("quantity_compare_to", qq, cel.IntType,
			quantityBinary(func(a, b *resource.Quantity) ref.Val { return types.Int(a.Cmp(*b)) }))),
		cel.Function("asApproximateFloat", cel.MemberOverload("quantity_get_float", []*cel.Type{q}, cel.DoubleType,
			quantityUnary(func(a *resource.Quantity) ref.Val { return types.Double(a.AsApproximateFloat64()) }))),
		cel.Function("asInteger", cel.MemberOverload("quantity_get_int", []*cel.Type{q}, cel.IntType,
			quantityUnary(func(a *resource.Quantity) ref.Val {
				v, ok := a.AsInt64()
				if !ok {
					return types.WrapErr(errors.New("cannot convert value to integer"))
				}
				return types.Int(v)
			}))),
		cel.Function("isInteger", cel.MemberOverload("quantity_is_integer", []*cel.Type{q}, cel.BoolType,
			quantityUnary(func(a *resource.Quantity) ref.Val {
				_, ok := a.AsInt64()
				return types.Bool(ok)
			}))),
		cel.Function("add",
			cel.MemberOverload("quantity_add", qq, q, quantityBinary(func(a, b *resource.Quantity) ref.Val { return quantityPlus(a, *b) })),
			cel.MemberOverload("quantity_add_int", []*cel.Type{q, cel.IntType}, q, quantityWithInt(quantityPlus))),
		cel.Function("sub",
			cel.MemberOverload("quantity_sub", qq, q, quantityBinary(func(a, b *resource.Quantity) ref.Val { return quantityMinus(a, *b) })),
			cel.MemberOverload("quantity_sub_int", []*cel.Type{q, cel.IntType}, q, quantityWithInt(quantityMinus))),
	}
}

func (quantityLib) ProgramOptions() []cel.ProgramOption { return nil }
