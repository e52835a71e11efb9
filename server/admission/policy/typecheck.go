package policy

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	skiffcel "skiff/server/cel"
)

// Kinds resolves the types a policy's expressions are checked against.
type Kinds interface {
	// KindFor is the kind of a served resource (ok false: not served).
	KindFor(ctx context.Context, gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool)
	// Schema is the schema of a kind's objects (ok false: unknown).
	Schema(ctx context.Context, gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, bool)
}

// typeCheck is upstream's TypeChecker.Check: each validation expression and
// messageExpression is compiled with object and oldObject typed as every
// kind the matchConstraints name explicitly (and params as the paramKind),
// and what does not compile becomes a warning. Kinds without a Go type
// (custom resources) are not checked.
func typeCheck(ctx context.Context, pol *admissionregistrationv1.ValidatingAdmissionPolicy, kinds Kinds) []admissionregistrationv1.ExpressionWarning {
	if kinds == nil || pol.Spec.MatchConstraints == nil {
		return nil
	}
	var paramType *skiffcel.DeclType
	if pk := pol.Spec.ParamKind; pk != nil {
		if gv, err := schema.ParseGroupVersion(pk.APIVersion); err == nil {
			paramType = declTypeOf(ctx, kinds, gv.WithKind(pk.Kind), "params")
		}
	}
	type target struct {
		gvk schema.GroupVersionKind
		env *cel.Env
	}
	var targets []target
	for _, gvk := range ruleKinds(ctx, pol.Spec.MatchConstraints.ResourceRules, kinds) {
		objType := declTypeOf(ctx, kinds, gvk, "object")
		if objType == nil {
			continue
		}
		env, err := typedEnv(&pol.Spec, objType, paramType)
		if err != nil {
			continue
		}
		targets = append(targets, target{gvk: gvk, env: env})
	}
	check := func(expr string) string {
		var msgs []string
		for _, t := range targets {
			if _, issues := t.env.Compile(expr); issues != nil && issues.Err() != nil {
				msgs = append(msgs, fmt.Sprintf("%v: %s\n", t.gvk, issues.String()))
			}
		}
		return strings.Join(msgs, "\n")
	}
	var out []admissionregistrationv1.ExpressionWarning
	path := field.NewPath("spec", "validations")
	for i, v := range pol.Spec.Validations {
		if w := check(v.Expression); w != "" {
			out = append(out, admissionregistrationv1.ExpressionWarning{FieldRef: path.Index(i).Child("expression").String(), Warning: w})
		}
		if v.MessageExpression == "" {
			continue
		}
		if w := check(v.MessageExpression); w != "" {
			out = append(out, admissionregistrationv1.ExpressionWarning{FieldRef: path.Index(i).Child("messageExpression").String(), Warning: w})
		}
	}
	return out
}

// ruleKinds are the kinds rules name without wildcards, as upstream's
// typesToCheck.
func ruleKinds(ctx context.Context, rules []admissionregistrationv1.NamedRuleWithOperations, kinds Kinds) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					if g == "*" || v == "*" || strings.Contains(res, "*") || strings.Contains(res, "/") {
						continue
					}
					if gvk, ok := kinds.KindFor(ctx, schema.GroupVersionResource{Group: g, Version: v, Resource: res}); ok && !seen[gvk] {
						seen[gvk] = true
						out = append(out, gvk)
					}
				}
			}
		}
	}
	return out
}

// typedEnv is the environment of a policy's validations with object,
// oldObject (and params) typed; variables are compiled in it in order so
// that their types flow into the validations.
func typedEnv(spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, objType, paramType *skiffcel.DeclType) (*cel.Env, error) {
	decls := []*skiffcel.DeclType{objType}
	opts := []cel.EnvOption{
		cel.Variable(varObject, objType.CelType()), cel.Variable(varOldObject, objType.CelType()),
		cel.Variable(varRequest, cel.DynType), cel.Variable(varNamespace, cel.DynType),
	}
	opts = append(opts, authorizerEnvOptions()...)
	if spec.ParamKind != nil {
		pt := cel.DynType
		if paramType != nil {
			decls, pt = append(decls, paramType), paramType.CelType()
		}
		opts = append(opts, cel.Variable(varParams, pt))
	}
	if len(spec.Variables) == 0 {
		return skiffcel.NewEnv(decls, opts...)
	}
	var vars []variableField
	build := func() (*cel.Env, error) {
		props := make(map[string]apiextensionsv1.JSONSchemaProps, len(vars))
		for _, v := range vars {
			props[v.name] = schemaOf(v.t)
		}
		dt := skiffcel.SchemaDeclType(&apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}, false).MaybeAssignTypeName("kubernetes.variables")
		return skiffcel.NewEnv(append(decls, dt), append(opts, cel.Variable(varVariables, dt.CelType()))...)
	}
	for _, v := range spec.Variables {
		env, err := build()
		if err != nil {
			return nil, err
		}
		t := cel.DynType
		if ast, issues := env.Compile(v.Expression); issues == nil || issues.Err() == nil {
			t = ast.OutputType()
		}
		vars = append(vars, variableField{name: v.Name, t: t})
	}
	return build()
}

// declTypeOf is the CEL type of a kind's objects (nil: unknown).
func declTypeOf(ctx context.Context, kinds Kinds, gvk schema.GroupVersionKind, name string) *skiffcel.DeclType {
	s, ok := kinds.Schema(ctx, gvk)
	if !ok {
		return nil
	}
	dt := skiffcel.SchemaDeclType(s, true)
	if dt == nil {
		return nil
	}
	return dt.MaybeAssignTypeName(name + "." + gvk.Kind)
}

// GoTypeSchema is the schema of a built-in kind's objects, from its Go
// type.
func GoTypeSchema(obj runtime.Object) *apiextensionsv1.JSONSchemaProps {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := goSchema(t, map[reflect.Type]bool{})
	return &s
}

var (
	timeType     = reflect.TypeOf(metav1.Time{})
	microType    = reflect.TypeOf(metav1.MicroTime{})
	durationType = reflect.TypeOf(metav1.Duration{})
	quantityType = reflect.TypeOf(resource.Quantity{})
	intstrType   = reflect.TypeOf(intstr.IntOrString{})
	rawType      = reflect.TypeOf(runtime.RawExtension{})
)

// dynSchema has no fixed CEL type.
var dynSchema = apiextensionsv1.JSONSchemaProps{XIntOrString: true}

// goSchema is the JSON schema of a Go API type as its JSON encoding has
// it: json-tagged fields, inline embedding, the apimachinery types that
// encode as strings or int-or-strings.
// A type met again inside itself (recursive types) is dynamic.
func goSchema(t reflect.Type, stack map[reflect.Type]bool) apiextensionsv1.JSONSchemaProps {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType, microType:
		return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}
	case durationType:
		return apiextensionsv1.JSONSchemaProps{Type: "string"}
	case quantityType, intstrType, rawType:
		return dynSchema
	}
	switch t.Kind() {
	case reflect.String:
		return apiextensionsv1.JSONSchemaProps{Type: "string"}
	case reflect.Bool:
		return apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return apiextensionsv1.JSONSchemaProps{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return apiextensionsv1.JSONSchemaProps{Type: "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "byte"}
		}
		items := goSchema(t.Elem(), stack)
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}}
	case reflect.Map:
		vals := goSchema(t.Elem(), stack)
		return apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &vals}}
	case reflect.Struct:
		if stack[t] {
			return dynSchema
		}
		stack[t] = true
		defer delete(stack, t)
		props := map[string]apiextensionsv1.JSONSchemaProps{}
		addStructFields(t, stack, props)
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	return dynSchema
}

func addStructFields(t reflect.Type, stack map[reflect.Type]bool, props map[string]apiextensionsv1.JSONSchemaProps) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addStructFields(ft, stack, props)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		props[name] = goSchema(f.Type, stack)
	}
}
