package cel

import (
	"fmt"
	"net/url"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// FormatType is the CEL type of format.<name>() values.
var FormatType = cel.ObjectType("kubernetes.NamedFormat")

// FormatValue is a named string format whose validate() reports why a
// string does not match.
type FormatValue struct {
	Name         string
	ValidateFunc func(string) []string
	// MaxRegexSize bounds the cost of validate(): upstream prices a format
	// as a regex of this length.
	MaxRegexSize int
}

func (d FormatValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from 'Format' to '%v'", typeDesc)
}

func (d FormatValue) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case FormatType.TypeName():
		return d
	case types.TypeType.TypeName():
		return FormatType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", FormatType, t)
}

func (d FormatValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(FormatValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(d.Name == o.Name)
}

func (d FormatValue) Type() ref.Type { return FormatType }
func (d FormatValue) Value() any     { return d }

// Format is the Kubernetes format library: format.<name>(),
// format.named(name) and <format>.validate(string).
func Format() cel.EnvOption { return cel.Lib(formatLib{}) }

type formatLib struct{}

func (formatLib) LibraryName() string { return "kubernetes.format" }

// The cost-relevant regex sizes upstream assigns to base64 and URI checks.
const (
	base64RegexLength = 84
	urlRegexLength    = 1103
)

func strfmtCheck(name, msg string) func(string) []string {
	return func(s string) []string {
		if !strfmt.Default.Validates(name, s) {
			return []string{msg}
		}
		return nil
	}
}

// namedFormats are the formats format.<name>() and format.named() know.
var namedFormats = map[string]FormatValue{
	"dns1123Label":           {"DNS1123Label", func(s string) []string { return apimachineryvalidation.NameIsDNSLabel(s, false) }, 30},
	"dns1123Subdomain":       {"DNS1123Subdomain", func(s string) []string { return apimachineryvalidation.NameIsDNSSubdomain(s, false) }, 60},
	"dns1035Label":           {"DNS1035Label", func(s string) []string { return apimachineryvalidation.NameIsDNS1035Label(s, false) }, 30},
	"qualifiedName":          {"QualifiedName", validation.IsQualifiedName, 60},
	"dns1123LabelPrefix":     {"DNS1123LabelPrefix", func(s string) []string { return apimachineryvalidation.NameIsDNSLabel(s, true) }, 30},
	"dns1123SubdomainPrefix": {"DNS1123SubdomainPrefix", func(s string) []string { return apimachineryvalidation.NameIsDNSSubdomain(s, true) }, 60},
	"dns1035LabelPrefix":     {"DNS1035LabelPrefix", func(s string) []string { return apimachineryvalidation.NameIsDNS1035Label(s, true) }, 30},
	"labelValue":             {"LabelValue", validation.IsValidLabelValue, 40},
	"uri": {"URI", func(s string) []string {
		if _, err := url.ParseRequestURI(s); err != nil {
			return []string{err.Error()}
		}
		return nil
	}, urlRegexLength},
	"uuid":     {"uuid", strfmtCheck("uuid", "does not match the UUID format"), len(strfmt.UUIDPattern)},
	"byte":     {"byte", strfmtCheck("byte", "invalid base64"), base64RegexLength},
	"date":     {"date", strfmtCheck("date", "invalid date"), len(strfmt.DateTimePattern)},
	"datetime": {"datetime", strfmtCheck("datetime", "invalid datetime"), len(strfmt.DateTimePattern)},
}

func (formatLib) CompileOptions() []cel.EnvOption {
	opts := []cel.EnvOption{
		cel.Function("validate", cel.MemberOverload("format-validate", []*cel.Type{FormatType, cel.StringType},
			cel.OptionalType(cel.ListType(cel.StringType)), cel.BinaryBinding(formatValidate))),
		cel.Function("format.named", cel.Overload("format-named", []*cel.Type{cel.StringType}, cel.OptionalType(FormatType),
			cel.UnaryBinding(func(name ref.Val) ref.Val {
				s, ok := name.Value().(string)
				if !ok {
					return types.MaybeNoSuchOverloadErr(name)
				}
				f, ok := namedFormats[s]
				if !ok {
					return types.OptionalNone
				}
				return types.OptionalOf(f)
			}))),
	}
	for name, f := range namedFormats {
		fn := "format." + name
		opts = append(opts, cel.Function(fn, cel.Overload(fn, []*cel.Type{}, FormatType,
			cel.FunctionBinding(func(...ref.Val) ref.Val { return f }))))
	}
	return opts
}

func (formatLib) ProgramOptions() []cel.ProgramOption { return nil }

func formatValidate(fv, sv ref.Val) ref.Val {
	f, ok := fv.Value().(FormatValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(fv)
	}
	s, ok := sv.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(sv)
	}
	if res := f.ValidateFunc(s); len(res) > 0 {
		return types.OptionalOf(types.NewStringList(types.DefaultTypeAdapter, res))
	}
	return types.OptionalNone
}
