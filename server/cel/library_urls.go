package cel

import (
	"fmt"
	"net/url"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// URLType is the CEL type of url(...) values.
var URLType = cel.ObjectType("kubernetes.URL")

// URLValue is a parsed URL as a CEL value.
type URLValue struct{ *url.URL }

func (d URLValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if reflect.TypeOf(d.URL).AssignableTo(typeDesc) {
		return d.URL, nil
	}
	if reflect.TypeOf("").AssignableTo(typeDesc) {
		return d.URL.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'URL' to '%v'", typeDesc)
}

func (d URLValue) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case URLType.TypeName():
		return d
	case types.TypeType.TypeName():
		return URLType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", URLType, t)
}

func (d URLValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(URLValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(d.URL.String() == o.URL.String())
}

func (d URLValue) Type() ref.Type { return URLType }
func (d URLValue) Value() any     { return d.URL }

// URLs is the Kubernetes URL library: url, isURL and the getters.
func URLs() cel.EnvOption { return cel.Lib(urlsLib{}) }

type urlsLib struct{}

func (urlsLib) LibraryName() string { return "kubernetes.urls" }

func urlGetter(name, id string, get func(*url.URL) ref.Val, result *cel.Type) cel.EnvOption {
	return cel.Function(name, cel.MemberOverload(id, []*cel.Type{URLType}, result, cel.UnaryBinding(func(arg ref.Val) ref.Val {
		u, ok := arg.Value().(*url.URL)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return get(u)
	})))
}

func (urlsLib) CompileOptions() []cel.EnvOption {
	str := func(f func(*url.URL) string) func(*url.URL) ref.Val {
		return func(u *url.URL) ref.Val { return types.String(f(u)) }
	}
	return []cel.EnvOption{
		cel.Function("url", cel.Overload("string_to_url", []*cel.Type{cel.StringType}, URLType, cel.UnaryBinding(stringToURL))),
		cel.Function("isURL", cel.Overload("is_url_string", []*cel.Type{cel.StringType}, cel.BoolType, cel.UnaryBinding(func(arg ref.Val) ref.Val {
			s, ok := arg.Value().(string)
			if !ok {
				return types.MaybeNoSuchOverloadErr(arg)
			}
			_, err := url.ParseRequestURI(s)
			return types.Bool(err == nil)
		}))),
		urlGetter("getScheme", "url_get_scheme", str(func(u *url.URL) string { return u.Scheme }), cel.StringType),
		urlGetter("getHost", "url_get_host", str(func(u *url.URL) string { return u.Host }), cel.StringType),
		urlGetter("getHostname", "url_get_hostname", str((*url.URL).Hostname), cel.StringType),
		urlGetter("getPort", "url_get_port", str((*url.URL).Port), cel.StringType),
		urlGetter("getEscapedPath", "url_get_escaped_path", str((*url.URL).EscapedPath), cel.StringType),
		urlGetter("getQuery", "url_get_query", func(u *url.URL) ref.Val {
			result := map[ref.Val]ref.Val{}
			for k, v := range u.Query() {
				result[types.String(k)] = types.NewStringList(types.DefaultTypeAdapter, v)
			}
			return types.NewRefValMap(types.DefaultTypeAdapter, result)
		}, cel.MapType(cel.StringType, cel.ListType(cel.StringType))),
	}
}

func (urlsLib) ProgramOptions() []cel.ProgramOption { return nil }

func stringToURL(arg ref.Val) ref.Val {
	s, ok := arg.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(arg)
	}
	// ParseRequestURI rejects relative references; Parse keeps the
	// fragment, which ParseRequestURI would not.
	if _, err := url.ParseRequestURI(s); err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	u, err := url.Parse(s)
	if err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	return URLValue{URL: u}
}
