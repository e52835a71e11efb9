package cel

import (
	"regexp"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Regex is the Kubernetes regex library: find and findAll on strings.
func Regex() cel.EnvOption { return cel.Lib(regexLib{}) }

type regexLib struct{}

func (regexLib) LibraryName() string { return "kubernetes.regex" }

func (regexLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Function("find", cel.MemberOverload("string_find_string", []*cel.Type{cel.StringType, cel.StringType}, cel.StringType,
			cel.BinaryBinding(func(s, re ref.Val) ref.Val { return regexFind(nil, s, re) }))),
		cel.Function("findAll",
			cel.MemberOverload("string_find_all_string", []*cel.Type{cel.StringType, cel.StringType}, cel.ListType(cel.StringType),
				cel.BinaryBinding(func(s, re ref.Val) ref.Val { return regexFindAll(nil, s, re, types.Int(-1)) })),
			cel.MemberOverload("string_find_all_string_int", []*cel.Type{cel.StringType, cel.StringType, cel.IntType}, cel.ListType(cel.StringType),
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					if len(args) != 3 {
						return types.NoSuchOverloadErr()
					}
					return regexFindAll(nil, args[0], args[1], args[2])
				}))),
	}
}

// ProgramOptions compiles constant patterns once per program instead of
// once per call.
func (regexLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.OptimizeRegex(
		regexOptimization("find", func(re *regexp.Regexp, args []ref.Val) ref.Val {
			if len(args) != 2 {
				return types.NoSuchOverloadErr()
			}
			return regexFind(re, args[0], args[1])
		}),
		regexOptimization("findAll", func(re *regexp.Regexp, args []ref.Val) ref.Val {
			n := ref.Val(types.Int(-1))
			switch len(args) {
			case 2:
			case 3:
				n = args[2]
			default:
				return types.NoSuchOverloadErr()
			}
			return regexFindAll(re, args[0], args[1], n)
		}),
	)}
}

func regexOptimization(fn string, eval func(*regexp.Regexp, []ref.Val) ref.Val) *interpreter.RegexOptimization {
	return &interpreter.RegexOptimization{
		Function:   fn,
		RegexIndex: 1,
		Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
			re, err := regexp.Compile(pattern)
			if err != nil {
				return nil, err
			}
			return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
				return eval(re, args)
			}), nil
		},
	}
}

// compileArg returns re when it was precompiled, else compiles the pattern.
func compileArg(re *regexp.Regexp, pattern ref.Val) (*regexp.Regexp, ref.Val) {
	if re != nil {
		return re, nil
	}
	p, ok := pattern.Value().(string)
	if !ok {
		return nil, types.MaybeNoSuchOverloadErr(pattern)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, types.NewErr("Illegal regex: %v", err.Error())
	}
	return re, nil
}

func regexFind(re *regexp.Regexp, strVal, pattern ref.Val) ref.Val {
	str, ok := strVal.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(strVal)
	}
	re, errVal := compileArg(re, pattern)
	if errVal != nil {
		return errVal
	}
	return types.String(re.FindString(str))
}

func regexFindAll(re *regexp.Regexp, strVal, pattern, nVal ref.Val) ref.Val {
	str, ok := strVal.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(strVal)
	}
	n, ok := nVal.Value().(int64)
	if !ok {
		return types.MaybeNoSuchOverloadErr(nVal)
	}
	re, errVal := compileArg(re, pattern)
	if errVal != nil {
		return errVal
	}
	return types.NewStringList(types.DefaultTypeAdapter, re.FindAllString(str, int(n)))
}
