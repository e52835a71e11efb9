package cel

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// BaseLibraries returns the language settings, libraries and program
// options of upstream's base CEL environment at the compatibility version
// a 1.37 API server uses (1.36): the CEL standard library plus ext.Strings
// v2, ext.Sets, ext.Lists v3, two-variable comprehensions, optional types
// and the Kubernetes libraries (lists, regex, urls, quantity, ip, cidr,
// format, semver, authz with selectors). Admission policies add their own
// variables (object, request, params, authorizer, ...) on top of these.
func BaseLibraries() []cel.EnvOption {
	return []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		// Validating declarations once here keeps each rule's compile cheap.
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		URLs(),
		Regex(),
		// cel-go v0.17.7 made has() cost 1; upstream keeps it free so that
		// existing rules keep their cost.
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		Lists(),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		Quantity(),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		IP(),
		CIDR(),
		Format(),
		ext.TwoVarComprehensions(),
		Semver(),
		ext.Lists(ext.ListsVersion(3)),
		// Declared everywhere, as upstream's base environment; only
		// expressions given an authorizer variable can call them.
		Authz(),
		AuthzSelectors(),
		cel.Lib(baseProgramLib{}),
	}
}

// baseProgramLib carries the program options every Kubernetes program
// gets: cost tracking with the Kubernetes library costs and the per-call
// limit.
type baseProgramLib struct{}

func (baseProgramLib) CompileOptions() []cel.EnvOption { return nil }

func (baseProgramLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostLimit(PerCallLimit),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.CostTracking(&CostEstimator{}),
	}
}

// baseEnv is built once: building it validates every library declaration,
// which is too slow to repeat for each CRD. It is immutable and holds no
// configuration; every caller extends it.
var baseEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(BaseLibraries()...)
})

// NewEnv returns the base environment extended with declTypes (schema
// object types that variables refer to, registered with a type provider so
// that field selection is type-checked) and opts (variables, more
// libraries).
func NewEnv(declTypes []*DeclType, opts ...cel.EnvOption) (*cel.Env, error) {
	base, err := baseEnv()
	if err != nil {
		return nil, fmt.Errorf("building the base CEL environment: %w", err)
	}
	if len(declTypes) > 0 {
		provider := newDeclTypeProvider(base.CELTypeProvider(), base.CELTypeAdapter(), declTypes...)
		opts = append([]cel.EnvOption{cel.CustomTypeProvider(provider), cel.CustomTypeAdapter(provider)}, opts...)
	}
	env, err := base.Extend(opts...)
	if err != nil {
		return nil, fmt.Errorf("extending the base CEL environment: %w", err)
	}
	return env, nil
}
