package cel

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	"skiff/server/auth"
)

// Authorizer decides the checks that authorizer expressions make: the API
// server's authorizer, asked on behalf of the request's user.
type Authorizer interface {
	Authorize(ctx context.Context, a auth.Attributes) (allowed bool, reason string, err error)
}

// The CEL types of the authz library, named as upstream's.
var (
	AuthorizerType    = cel.ObjectType("kubernetes.authorization.Authorizer")
	PathCheckType     = cel.ObjectType("kubernetes.authorization.PathCheck")
	GroupCheckType    = cel.ObjectType("kubernetes.authorization.GroupCheck")
	ResourceCheckType = cel.ObjectType("kubernetes.authorization.ResourceCheck")
	DecisionType      = cel.ObjectType("kubernetes.authorization.Decision")
)

// The variables admission expressions (policies, webhook matchConditions)
// see the authorizer as. authorizer.requestResource is one variable with a
// dotted name: the checker resolves the qualified name before selection.
const (
	AuthorizerVariable      = "authorizer"
	RequestResourceVariable = "authorizer.requestResource"
)

// AuthorizerDeclarations declares authorizer and
// authorizer.requestResource, as upstream's HasAuthorizer.
func AuthorizerDeclarations() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable(AuthorizerVariable, AuthorizerType),
		cel.Variable(RequestResourceVariable, ResourceCheckType),
	}
}

// RequestResource is the resource a request is for: what
// authorizer.requestResource checks.
type RequestResource struct {
	Group, Resource, Subresource string
	Namespace, Name              string
}

// AuthorizerBindings are the values of authorizer and
// authorizer.requestResource for one request by user. Checks run under
// ctx (the request's), so the bindings must not outlive it.
func AuthorizerBindings(ctx context.Context, a Authorizer, user *auth.User, rr RequestResource) map[string]any {
	return map[string]any{
		AuthorizerVariable:      NewAuthorizerValue(ctx, a, user),
		RequestResourceVariable: NewRequestResourceValue(ctx, a, user, rr),
	}
}

// NewAuthorizerValue is the `authorizer` value: checks for user.
func NewAuthorizerValue(ctx context.Context, a Authorizer, user *auth.User) ref.Val {
	return authorizerValue{ctx: ctx, authz: a, user: user}
}

// NewRequestResourceValue is the `authorizer.requestResource` value: a
// ResourceCheck for the request's own resource.
func NewRequestResourceValue(ctx context.Context, a Authorizer, user *auth.User, rr RequestResource) ref.Val {
	g := groupCheckValue{authorizer: authorizerValue{ctx: ctx, authz: a, user: user}, group: rr.Group}
	return resourceCheckValue{groupCheck: g, resource: rr.Resource, subresource: rr.Subresource, namespace: rr.Namespace, name: rr.Name}
}

// Authz is the Kubernetes authz library: authorizer.path/group/
// serviceAccount, resource checks narrowed by resource, subresource,
// namespace and name, check(verb) and the decision's allowed, reason,
// errored and error.
func Authz() cel.EnvOption { return cel.Lib(authzLib{}) }

// AuthzSelectors adds fieldSelector and labelSelector to resource checks
// (on by default since 1.31; the feature gate is gone in 1.37).
func AuthzSelectors() cel.EnvOption { return cel.Lib(authzSelectorsLib{}) }

type authzLib struct{}

func (authzLib) LibraryName() string { return "kubernetes.authz" }

func (authzLib) CompileOptions() []cel.EnvOption {
	str := cel.StringType
	return []cel.EnvOption{
		cel.Function("path", cel.MemberOverload("authorizer_path", []*cel.Type{AuthorizerType, str}, PathCheckType,
			stringBinding(func(a authorizerValue, path string) ref.Val {
				if strings.TrimSpace(path) == "" {
					return types.NewErr("path must not be empty")
				}
				return pathCheckValue{authorizer: a, path: path}
			}))),
		cel.Function("group", cel.MemberOverload("authorizer_group", []*cel.Type{AuthorizerType, str}, GroupCheckType,
			stringBinding(func(a authorizerValue, group string) ref.Val { return groupCheckValue{authorizer: a, group: group} }))),
		cel.Function("serviceAccount", cel.MemberOverload("authorizer_serviceaccount", []*cel.Type{AuthorizerType, str, str}, AuthorizerType,
			cel.FunctionBinding(authorizerServiceAccount))),
		cel.Function("resource", cel.MemberOverload("groupcheck_resource", []*cel.Type{GroupCheckType, str}, ResourceCheckType,
			stringBinding(func(g groupCheckValue, resource string) ref.Val {
				if strings.TrimSpace(resource) == "" {
					return types.NewErr("resource must not be empty")
				}
				return resourceCheckValue{groupCheck: g, resource: resource}
			}))),
		cel.Function("subresource", cel.MemberOverload("resourcecheck_subresource", []*cel.Type{ResourceCheckType, str}, ResourceCheckType,
			stringBinding(func(r resourceCheckValue, s string) ref.Val { r.subresource = s; return r }))),
		cel.Function("namespace", cel.MemberOverload("resourcecheck_namespace", []*cel.Type{ResourceCheckType, str}, ResourceCheckType,
			stringBinding(func(r resourceCheckValue, s string) ref.Val { r.namespace = s; return r }))),
		cel.Function("name", cel.MemberOverload("resourcecheck_name", []*cel.Type{ResourceCheckType, str}, ResourceCheckType,
			stringBinding(func(r resourceCheckValue, s string) ref.Val { r.name = s; return r }))),
		cel.Function("check",
			cel.MemberOverload("pathcheck_check", []*cel.Type{PathCheckType, str}, DecisionType, stringBinding(pathCheckValue.check)),
			cel.MemberOverload("resourcecheck_check", []*cel.Type{ResourceCheckType, str}, DecisionType, stringBinding(resourceCheckValue.check))),
		cel.Function("allowed", cel.MemberOverload("decision_allowed", []*cel.Type{DecisionType}, cel.BoolType,
			decisionBinding(func(d decisionValue) ref.Val { return types.Bool(d.allowed) }))),
		cel.Function("reason", cel.MemberOverload("decision_reason", []*cel.Type{DecisionType}, cel.StringType,
			decisionBinding(func(d decisionValue) ref.Val { return types.String(d.reason) }))),
		cel.Function("errored", cel.MemberOverload("decision_errored", []*cel.Type{DecisionType}, cel.BoolType,
			decisionBinding(func(d decisionValue) ref.Val { return types.Bool(d.err != nil) }))),
		cel.Function("error", cel.MemberOverload("decision_error", []*cel.Type{DecisionType}, cel.StringType,
			decisionBinding(func(d decisionValue) ref.Val {
				if d.err == nil {
					return types.String("")
				}
				return types.String(d.err.Error())
			}))),
	}
}

func (authzLib) ProgramOptions() []cel.ProgramOption { return nil }

type authzSelectorsLib struct{}

func (authzSelectorsLib) LibraryName() string { return "kubernetes.authzSelectors" }

func (authzSelectorsLib) CompileOptions() []cel.EnvOption {
	args := []*cel.Type{ResourceCheckType, cel.StringType}
	return []cel.EnvOption{
		cel.Function("fieldSelector", cel.MemberOverload("authorizer_fieldselector", args, ResourceCheckType,
			stringBinding(func(r resourceCheckValue, s string) ref.Val { r.fieldSelector = s; return r }))),
		cel.Function("labelSelector", cel.MemberOverload("authorizer_labelselector", args, ResourceCheckType,
			stringBinding(func(r resourceCheckValue, s string) ref.Val { r.labelSelector = s; return r }))),
	}
}

func (authzSelectorsLib) ProgramOptions() []cel.ProgramOption { return nil }

// stringBinding binds a member function of receiver type T taking one
// string.
func stringBinding[T ref.Val](f func(T, string) ref.Val) cel.OverloadOpt {
	return cel.BinaryBinding(func(recv, arg ref.Val) ref.Val {
		r, ok := recv.(T)
		if !ok {
			return types.MaybeNoSuchOverloadErr(recv)
		}
		s, ok := arg.(types.String)
		if !ok {
			return types.MaybeNoSuchOverloadErr(arg)
		}
		return f(r, string(s))
	})
}

func decisionBinding(f func(decisionValue) ref.Val) cel.OverloadOpt {
	return cel.UnaryBinding(func(v ref.Val) ref.Val {
		d, ok := v.(decisionValue)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		return f(d)
	})
}

// authorizerServiceAccount is authorizer.serviceAccount(namespace, name):
// checks for that service account instead of the requester, its name a
// DNS subdomain and its namespace a DNS label, as upstream.
func authorizerServiceAccount(args ...ref.Val) ref.Val {
	if len(args) != 3 {
		return types.NoSuchOverloadErr()
	}
	a, ok := args[0].(authorizerValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(args[0])
	}
	namespace, ok := args[1].(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(args[1])
	}
	name, ok := args[2].(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(args[2])
	}
	if len(apivalidation.ValidateServiceAccountName(string(name), false)) > 0 {
		return types.NewErr("Invalid service account name")
	}
	if len(apivalidation.ValidateNamespaceName(string(namespace), false)) > 0 {
		return types.NewErr("Invalid service account namespace")
	}
	// The user a service account token authenticates as (without the
	// pod and node claims, which a check names no token for).
	a.user = &auth.User{
		Name:   fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups: []string{auth.GroupServiceAccounts, auth.GroupServiceAccounts + ":" + string(namespace)},
	}
	return a
}

var errNoAuthorizer = errors.New("no authorizer is configured")

// authorizerValue is `authorizer`: the authorizer and the user checks are
// made for. It holds the request's context because CEL function bindings
// get none, and the value lives only as long as one evaluation.
type authorizerValue struct {
	ctx   context.Context
	authz Authorizer
	user  *auth.User
}

func (a authorizerValue) authorize(attrs auth.Attributes) ref.Val {
	if a.authz == nil {
		return decisionValue{err: errNoAuthorizer}
	}
	attrs.User = a.user
	ctx := a.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	allowed, reason, err := a.authz.Authorize(ctx, attrs)
	return decisionValue{allowed: allowed, reason: reason, err: err}
}

type pathCheckValue struct {
	authorizer authorizerValue
	path       string
}

// check asks whether the user may send verb (an HTTP method) to the path.
func (p pathCheckValue) check(verb string) ref.Val {
	return p.authorizer.authorize(auth.Attributes{Verb: verb, Path: p.path})
}

type groupCheckValue struct {
	authorizer authorizerValue
	group      string
}

type resourceCheckValue struct {
	groupCheck                   groupCheckValue
	resource, subresource        string
	namespace, name              string
	fieldSelector, labelSelector string
}

// check asks whether the user may verb the resource, in every version
// (upstream's APIVersion "*"). The selectors are accepted and priced as
// upstream's, but auth.Attributes carries none: skiff's authorizers (RBAC,
// Node) decide without them, as upstream's RBAC does.
func (r resourceCheckValue) check(verb string) ref.Val {
	return r.groupCheck.authorizer.authorize(auth.Attributes{
		Verb: verb, ResourceRequest: true, APIGroup: r.groupCheck.group, APIVersion: "*",
		Resource: r.resource, Subresource: r.subresource, Namespace: r.namespace, Name: r.name,
	})
}

// decisionValue is a check's outcome, as the authorizer gave it.
type decisionValue struct {
	allowed bool
	reason  string
	err     error
}

// The authz values have functions but no fields and no conversions; they
// compare unequal to everything, as upstream's (== is no such overload).

func (a authorizerValue) ConvertToNative(t reflect.Type) (any, error) { return nativeAuthz(a, t) }
func (a authorizerValue) ConvertToType(t ref.Type) ref.Val            { return convertAuthz(a, t) }
func (a authorizerValue) Equal(o ref.Val) ref.Val                     { return types.MaybeNoSuchOverloadErr(o) }
func (a authorizerValue) Type() ref.Type                              { return AuthorizerType }
func (a authorizerValue) Value() any                                  { return a }

func (p pathCheckValue) ConvertToNative(t reflect.Type) (any, error) { return nativeAuthz(p, t) }
func (p pathCheckValue) ConvertToType(t ref.Type) ref.Val            { return convertAuthz(p, t) }
func (p pathCheckValue) Equal(o ref.Val) ref.Val                     { return types.MaybeNoSuchOverloadErr(o) }
func (p pathCheckValue) Type() ref.Type                              { return PathCheckType }
func (p pathCheckValue) Value() any                                  { return p }

func (g groupCheckValue) ConvertToNative(t reflect.Type) (any, error) { return nativeAuthz(g, t) }
func (g groupCheckValue) ConvertToType(t ref.Type) ref.Val            { return convertAuthz(g, t) }
func (g groupCheckValue) Equal(o ref.Val) ref.Val                     { return types.MaybeNoSuchOverloadErr(o) }
func (g groupCheckValue) Type() ref.Type                              { return GroupCheckType }
func (g groupCheckValue) Value() any                                  { return g }

func (r resourceCheckValue) ConvertToNative(t reflect.Type) (any, error) { return nativeAuthz(r, t) }
func (r resourceCheckValue) ConvertToType(t ref.Type) ref.Val            { return convertAuthz(r, t) }
func (r resourceCheckValue) Equal(o ref.Val) ref.Val                     { return types.MaybeNoSuchOverloadErr(o) }
func (r resourceCheckValue) Type() ref.Type                              { return ResourceCheckType }
func (r resourceCheckValue) Value() any                                  { return r }

func (d decisionValue) ConvertToNative(t reflect.Type) (any, error) { return nativeAuthz(d, t) }
func (d decisionValue) ConvertToType(t ref.Type) ref.Val            { return convertAuthz(d, t) }
func (d decisionValue) Equal(o ref.Val) ref.Val                     { return types.MaybeNoSuchOverloadErr(o) }
func (d decisionValue) Type() ref.Type                              { return DecisionType }
func (d decisionValue) Value() any                                  { return d }

func nativeAuthz(v ref.Val, t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from '%s' to '%v'", v.Type().TypeName(), t)
}

func convertAuthz(v ref.Val, t ref.Type) ref.Val {
	switch t.TypeName() {
	case v.Type().TypeName():
		return v
	case types.TypeType.TypeName():
		return v.Type().(ref.Val)
	}
	return types.NewErr("type conversion error from '%s' to '%s'", v.Type().TypeName(), t.TypeName())
}

func isAuthzValue(v ref.Val) bool {
	switch v.(type) {
	case authorizerValue, pathCheckValue, groupCheckValue, resourceCheckValue, decisionValue:
		return true
	}
	return false
}

// Costs, as upstream's: a check is priced so that an expression can make
// about two (the per-call limit is 1,000,000), the builders and accessors
// cost 1, and a selector costs its parse plus the requirements it could
// hold.
const (
	authzCheckCost = 350000
	// The shortest selector requirement that allocates a values slice is
	// two characters ("k,"); each costs a struct and a list.
	selectorRequirementsPerByte = 0.5
	selectorCostPerRequirement  = float64(common.ListCreateBaseCost + common.StructCreateBaseCost)
)

func selectorCost(length checker.SizeEstimate) checker.CostEstimate {
	parse := length.MultiplyByCostFactor(common.StringTraversalCostFactor)
	requirements := length.MultiplyByCostFactor(selectorRequirementsPerByte).MultiplyByCostFactor(selectorCostPerRequirement)
	return checker.CostEstimate{Min: common.ListCreateBaseCost, Max: common.ListCreateBaseCost}.Add(parse).Add(requirements)
}

// authzCallCost is the runtime cost of an authz function (ok false: not
// one). args include the receiver.
func authzCallCost(function string, args []ref.Val) (uint64, bool) {
	switch function {
	case "check":
		return authzCheckCost, true
	case "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason", "error", "errored":
		return 1, true
	case "fieldSelector", "labelSelector":
		if len(args) >= 2 {
			n := actualSize(args[1])
			return selectorCost(checker.SizeEstimate{Min: n, Max: n}).Max, true
		}
	case "_==_":
		if len(args) == 2 && isAuthzValue(args[0]) {
			return 1, true
		}
	}
	return 0, false
}

// estimateAuthzCall is the estimated cost of an authz function (nil: not
// one). args exclude the receiver.
func (l *CostEstimator) estimateAuthzCall(function string, args []checker.AstNode) *checker.CallEstimate {
	switch function {
	case "check":
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: authzCheckCost, Max: authzCheckCost}}
	case "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason", "error", "errored":
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}}
	case "fieldSelector", "labelSelector":
		if len(args) >= 1 {
			return &checker.CallEstimate{CostEstimate: selectorCost(l.sizeEstimate(args[0]))}
		}
	}
	return nil
}

// isAuthzType reports whether t is one of the authz library's types (whose
// equality costs 1).
func isAuthzType(t *types.Type) bool {
	switch t.TypeName() {
	case AuthorizerType.TypeName(), PathCheckType.TypeName(), GroupCheckType.TypeName(),
		ResourceCheckType.TypeName(), DecisionType.TypeName():
		return true
	}
	return false
}
