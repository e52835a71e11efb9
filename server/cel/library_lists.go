package cel

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Lists is the Kubernetes list library (version 0, the one a 1.36
// compatibility version enables): isSorted, sum, min, max, indexOf and
// lastIndexOf on lists.
func Lists() cel.EnvOption { return cel.Lib(listsLib{}) }

type listsLib struct{}

func (listsLib) LibraryName() string { return "kubernetes.lists" }

type namedType struct {
	name string
	t    *cel.Type
}

var (
	summableTypes = []namedType{
		{"int", cel.IntType}, {"uint", cel.UintType}, {"double", cel.DoubleType}, {"duration", cel.DurationType},
	}
	zeroOfSummable = map[string]ref.Val{
		"int": types.Int(0), "uint": types.Uint(0), "double": types.Double(0), "duration": types.Duration{},
	}
	comparableTypes = []namedType{
		{"int", cel.IntType}, {"uint", cel.UintType}, {"double", cel.DoubleType}, {"bool", cel.BoolType},
		{"duration", cel.DurationType}, {"timestamp", cel.TimestampType}, {"string", cel.StringType}, {"bytes", cel.BytesType},
	}
	paramA = cel.TypeParamType("A")
)

func (listsLib) CompileOptions() []cel.EnvOption {
	var isSortedO, sumO, maxO, minO []cel.FunctionOpt
	for _, ct := range comparableTypes {
		lt := []*cel.Type{cel.ListType(ct.t)}
		isSortedO = append(isSortedO, cel.MemberOverload(fmt.Sprintf("list_%s_is_sorted_bool", ct.name), lt, cel.BoolType, cel.UnaryBinding(listIsSorted)))
		maxO = append(maxO, cel.MemberOverload(fmt.Sprintf("list_%s_max_%s", ct.name, ct.name), lt, ct.t, cel.UnaryBinding(listExtreme("max", types.IntNegOne))))
		minO = append(minO, cel.MemberOverload(fmt.Sprintf("list_%s_min_%s", ct.name, ct.name), lt, ct.t, cel.UnaryBinding(listExtreme("min", types.IntOne))))
	}
	for _, st := range summableTypes {
		zero := zeroOfSummable[st.name]
		sumO = append(sumO, cel.MemberOverload(fmt.Sprintf("list_%s_sum_%s", st.name, st.name),
			[]*cel.Type{cel.ListType(st.t)}, st.t, cel.UnaryBinding(func(l ref.Val) ref.Val { return listSum(zero, l) })))
	}
	return []cel.EnvOption{
		cel.Function("isSorted", isSortedO...),
		cel.Function("sum", sumO...),
		cel.Function("max", maxO...),
		cel.Function("min", minO...),
		cel.Function("indexOf", cel.MemberOverload("list_a_index_of_int", []*cel.Type{cel.ListType(paramA), paramA}, cel.IntType,
			cel.BinaryBinding(func(l, v ref.Val) ref.Val { return listIndexOf(l, v, false) }))),
		cel.Function("lastIndexOf", cel.MemberOverload("list_a_last_index_of_int", []*cel.Type{cel.ListType(paramA), paramA}, cel.IntType,
			cel.BinaryBinding(func(l, v ref.Val) ref.Val { return listIndexOf(l, v, true) }))),
	}
}

func (listsLib) ProgramOptions() []cel.ProgramOption { return nil }

func listIsSorted(val ref.Val) ref.Val {
	iterable, ok := val.(traits.Iterable)
	if !ok {
		return types.MaybeNoSuchOverloadErr(val)
	}
	var prev traits.Comparer
	for it := iterable.Iterator(); it.HasNext() == types.True; {
		next := it.Next()
		cmp, ok := next.(traits.Comparer)
		if !ok {
			return types.MaybeNoSuchOverloadErr(next)
		}
		if prev != nil && prev.Compare(next) == types.IntOne {
			return types.False
		}
		prev = cmp
	}
	return types.True
}

func listSum(zero ref.Val, val ref.Val) ref.Val {
	acc, ok := zero.(traits.Adder)
	if !ok {
		return types.MaybeNoSuchOverloadErr(zero)
	}
	iterable, ok := val.(traits.Iterable)
	if !ok {
		return types.MaybeNoSuchOverloadErr(val)
	}
	for it := iterable.Iterator(); it.HasNext() == types.True; {
		s := acc.Add(it.Next())
		if acc, ok = s.(traits.Adder); !ok {
			return types.MaybeNoSuchOverloadErr(s)
		}
	}
	return acc.(ref.Val)
}

// listExtreme returns min or max: prefer is the Compare result of the
// current best against the next element that makes the next one better.
func listExtreme(name string, prefer ref.Val) func(ref.Val) ref.Val {
	return func(val ref.Val) ref.Val {
		iterable, ok := val.(traits.Iterable)
		if !ok {
			return types.MaybeNoSuchOverloadErr(val)
		}
		var result traits.Comparer
		for it := iterable.Iterator(); it.HasNext() == types.True; {
			next := it.Next()
			cmp, ok := next.(traits.Comparer)
			if !ok {
				return types.MaybeNoSuchOverloadErr(next)
			}
			if result == nil || result.Compare(next) == prefer {
				result = cmp
			}
		}
		if result == nil {
			return types.NewErr("%s called on empty list", name)
		}
		return result.(ref.Val)
	}
}

func listIndexOf(list, item ref.Val, last bool) ref.Val {
	lister, ok := list.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(list)
	}
	sz := lister.Size().(types.Int)
	for n := types.Int(0); n < sz; n++ {
		i := n
		if last {
			i = sz - 1 - n
		}
		if lister.Get(i).Equal(item) == types.True {
			return i
		}
	}
	return types.Int(-1)
}
