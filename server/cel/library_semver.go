package cel

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// SemverType is the CEL type of semver(...) values.
var SemverType = cel.ObjectType("kubernetes.Semver")

// SemverValue is a semantic version as a CEL value.
type SemverValue struct{ semver.Version }

func (v SemverValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(v.Version).AssignableTo(typeDesc) {
		return v.Version, nil
	}
	if reflect.TypeOf("").AssignableTo(typeDesc) {
		return v.Version.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'Semver' to '%v'", typeDesc)
}

func (v SemverValue) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case SemverType.TypeName():
		return v
	case types.TypeType.TypeName():
		return SemverType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", SemverType, t)
}

func (v SemverValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(SemverValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.Version.EQ(o.Version))
}

func (v SemverValue) Type() ref.Type { return SemverType }
func (v SemverValue) Value() any     { return v.Version }

// Semver is the Kubernetes semver library (version 1: semver(s, normalize)
// and isSemver(s, normalize) included).
func Semver() cel.EnvOption { return cel.Lib(semverLib{}) }

type semverLib struct{}

func (semverLib) LibraryName() string { return "kubernetes.Semver" }

func semverBinary(f func(a, b semver.Version) ref.Val) cel.OverloadOpt {
	return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
		va, ok := a.Value().(semver.Version)
		if !ok {
			return types.MaybeNoSuchOverloadErr(a)
		}
		vb, ok := b.Value().(semver.Version)
		if !ok {
			return types.MaybeNoSuchOverloadErr(b)
		}
		return f(va, vb)
	})
}

func semverPart(f func(semver.Version) uint64) cel.OverloadOpt {
	return cel.UnaryBinding(func(a ref.Val) ref.Val {
		v, ok := a.Value().(semver.Version)
		if !ok {
			return types.MaybeNoSuchOverloadErr(a)
		}
		return types.Int(f(v))
	})
}

func (semverLib) CompileOptions() []cel.EnvOption {
	s, ss := SemverType, []*cel.Type{SemverType, SemverType}
	return []cel.EnvOption{
		cel.Function("semver",
			cel.Overload("string_to_semver", []*cel.Type{cel.StringType}, s, cel.UnaryBinding(func(a ref.Val) ref.Val { return stringToSemver(a, types.False) })),
			cel.Overload("string_bool_to_semver", []*cel.Type{cel.StringType, cel.BoolType}, s, cel.BinaryBinding(stringToSemver))),
		cel.Function("isSemver",
			cel.Overload("is_semver_string", []*cel.Type{cel.StringType}, cel.BoolType, cel.UnaryBinding(func(a ref.Val) ref.Val { return isSemver(a, types.False) })),
			cel.Overload("is_semver_string_bool", []*cel.Type{cel.StringType, cel.BoolType}, cel.BoolType, cel.BinaryBinding(isSemver))),
		cel.Function("isGreaterThan", cel.MemberOverload("semver_is_greater_than", ss, cel.BoolType,
			semverBinary(func(a, b semver.Version) ref.Val { return types.Bool(a.Compare(b) == 1) }))),
		cel.Function("isLessThan", cel.MemberOverload("semver_is_less_than", ss, cel.BoolType,
			semverBinary(func(a, b semver.Version) ref.Val { return types.Bool(a.Compare(b) == -1) }))),
		cel.Function("compareTo", cel.MemberOverload("semver_compare_to", ss, cel.IntType,
			semverBinary(func(a, b semver.Version) ref.Val { return types.Int(a.Compare(b)) }))),
		cel.Function("major", cel.MemberOverload("semver_major", []*cel.Type{s}, cel.IntType, semverPart(func(v semver.Version) uint64 { return v.Major }))),
		cel.Function("minor", cel.MemberOverload("semver_minor", []*cel.Type{s}, cel.IntType, semverPart(func(v semver.Version) uint64 { return v.Minor }))),
		cel.Function("patch", cel.MemberOverload("semver_patch", []*cel.Type{s}, cel.IntType, semverPart(func(v semver.Version) uint64 { return v.Patch }))),
	}
}

func (semverLib) ProgramOptions() []cel.ProgramOption { return nil }

func parseSemverArgs(arg, normalizeArg ref.Val) (semver.Version, ref.Val, error) {
	str, ok := arg.Value().(string)
	if !ok {
		return semver.Version{}, types.MaybeNoSuchOverloadErr(arg), nil
	}
	normalize, ok := normalizeArg.Value().(bool)
	if !ok {
		return semver.Version{}, types.MaybeNoSuchOverloadErr(normalizeArg), nil
	}
	if normalize {
		v, err := normalizeAndParseSemver(str)
		return v, nil, err
	}
	v, err := semver.Parse(str)
	return v, nil, err
}

func isSemver(arg, normalizeArg ref.Val) ref.Val {
	_, bad, err := parseSemverArgs(arg, normalizeArg)
	if bad != nil {
		return bad
	}
	return types.Bool(err == nil)
}

func stringToSemver(arg, normalizeArg ref.Val) ref.Val {
	v, bad, err := parseSemverArgs(arg, normalizeArg)
	if bad != nil {
		return bad
	}
	if err != nil {
		return types.WrapErr(err)
	}
	return SemverValue{Version: v}
}

// normalizeAndParseSemver accepts the forms Kubernetes versions take: a
// leading "v", leading zeros, and missing minor or patch numbers.
func normalizeAndParseSemver(s string) (semver.Version, error) {
	s = strings.TrimPrefix(s, "v")
	parts := strings.SplitN(s, ".", 3)
	for i, p := range parts {
		if len(p) > 1 {
			p = strings.TrimLeft(p, "0")
			if len(p) == 0 || !strings.ContainsAny(p[0:1], "0123456789") {
				p = "0" + p
			}
			parts[i] = p
		}
	}
	if len(parts) < 3 {
		if strings.ContainsAny(parts[len(parts)-1], "+-") {
			return semver.Version{}, errors.New("short version cannot contain PreRelease/Build meta data")
		}
		for len(parts) < 3 {
			parts = append(parts, "0")
		}
	}
	return semver.Parse(strings.Join(parts, "."))
}
