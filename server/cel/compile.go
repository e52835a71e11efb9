package cel

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The variables a rule sees.
const (
	ScopedVarName    = "self"
	OldScopedVarName = "oldSelf"
)

// ruleError is why a rule or its messageExpression did not compile.
type ruleError struct {
	internal bool
	detail   string
}

func (e *ruleError) Error() string { return e.detail }

// compiledRule is one x-kubernetes-validations entry, compiled.
type compiledRule struct {
	program     cel.Program
	err         *ruleError
	usesOldSelf bool
	// maxCost is the estimated worst-case cost of one evaluation.
	maxCost uint64
	// maxCardinality is how often the rule can run in one object when it
	// sits under unbounded lists or maps.
	maxCardinality uint64
	message        cel.Program
	messageErr     *ruleError
	messageMaxCost uint64
	// fieldPath is the rule's fieldPath, normalized ("spec.a[key]"); it is
	// appended to the node's path as one element, as upstream does.
	fieldPath string
}

// Validator holds the compiled rules of one schema node and the
// validators of the nodes below it that have rules.
type Validator struct {
	schema         *apiextensionsv1.JSONSchemaProps
	isResourceRoot bool
	rules          []apiextensionsv1.ValidationRule
	compiled       []compiledRule
	compileErr     error
	usesOldSelf    bool

	items                *Validator
	additionalProperties *Validator
	properties           map[string]*Validator
	allOf                []*Validator
}

// CompileSchema compiles every x-kubernetes-validations rule in s and its
// children. The errors name the rule's field path below fld (as the CRD's
// validation reports them): syntax errors, undefined fields, estimated cost
// over the limit. A nil Validator with no errors means s has no rules.
func CompileSchema(s *apiextensionsv1.JSONSchemaProps, fld *field.Path) (*Validator, field.ErrorList) {
	if s == nil || !hasValidations(s) {
		return nil, nil
	}
	c := &compiler{}
	one := uint64(1)
	v := c.walk(s, s, true, SchemaDeclType(s, true), walkCtx{path: fld, report: true, cardinality: &one})
	c.errs = append(c.errs, c.total.errors(fld)...)
	return v, c.errs
}

func hasValidations(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 || hasValidations(itemsSchema(s)) || hasValidations(additionalSchema(s)) {
		return true
	}
	for _, p := range s.Properties {
		if hasValidations(&p) {
			return true
		}
	}
	for _, a := range s.AllOf {
		if hasValidations(&a) {
			return true
		}
	}
	return false
}

type compiler struct {
	errs  field.ErrorList
	total totalCost
}

// walkCtx is where in the schema the walk is.
type walkCtx struct {
	path *field.Path
	// report is false below allOf, whose rules the CRD's validation does
	// not compile (they fail at run time instead).
	report bool
	// cardinality is the product of the maxItems/maxProperties above this
	// node, nil when some list or map above is unbounded.
	cardinality *uint64
	// forbidOldSelf is the highest list (not a map list) above this node:
	// its items cannot be matched to old ones.
	forbidOldSelf *field.Path
}

func (w walkCtx) child(path *field.Path, parent *apiextensionsv1.JSONSchemaProps) walkCtx {
	n := walkCtx{path: path, report: w.report, forbidOldSelf: w.forbidOldSelf}
	if w.cardinality != nil {
		if f := maxElementsFactor(parent); f != nil {
			c := multiplyWithOverflowGuard(*w.cardinality, *f)
			n.cardinality = &c
		}
	}
	return n
}

// maxElementsFactor is by how much s multiplies the occurrences of its
// children: maxProperties or maxItems for maps and lists (nil if
// unbounded), 1 otherwise.
func maxElementsFactor(s *apiextensionsv1.JSONSchemaProps) *uint64 {
	one := uint64(1)
	var limit *int64
	switch s.Type {
	case "object":
		if s.AdditionalProperties == nil {
			return &one
		}
		limit = s.MaxProperties
	case "array":
		limit = s.MaxItems
	default:
		return &one
	}
	if limit == nil {
		return nil
	}
	n := uint64(zeroIfNegative(*limit))
	return &n
}

// walk compiles the rules of validation (the schema or one of its allOf
// entries) against node, whose CEL type is dt, and recurses.
func (c *compiler) walk(validation, node *apiextensionsv1.JSONSchemaProps, isResourceRoot bool, dt *DeclType, w walkCtx) *Validator {
	v := &Validator{schema: node, isResourceRoot: isResourceRoot, rules: validation.XValidations}
	if len(validation.XValidations) > 0 {
		c.compileNode(v, validation, node, dt, w)
	}
	if vi, ni := itemsSchema(validation), itemsSchema(node); vi != nil && ni != nil {
		cw := w.child(w.path.Child("items"), node)
		if (node.XListType == nil || *node.XListType != "map") && cw.forbidOldSelf == nil {
			cw.forbidOldSelf = w.path
		}
		v.items = c.walk(vi, ni, ni.XEmbeddedResource, elemType(dt, ni), cw)
	}
	for name, vp := range validation.Properties {
		np, ok := node.Properties[name]
		if !ok {
			continue
		}
		vp := vp
		cw := w.child(w.path.Child("properties").Key(name), node)
		if p := c.walk(&vp, &np, np.XEmbeddedResource, fieldType(dt, name, &np), cw); p != nil {
			if v.properties == nil {
				v.properties = map[string]*Validator{}
			}
			v.properties[name] = p
		}
	}
	if va, na := additionalSchema(validation), additionalSchema(node); va != nil && na != nil {
		v.additionalProperties = c.walk(va, na, na.XEmbeddedResource, elemType(dt, na), w.child(w.path.Child("additionalProperties"), node))
	}
	for i := range validation.AllOf {
		aw := walkCtx{path: w.path.Child("allOf").Index(i), cardinality: w.cardinality, forbidOldSelf: w.forbidOldSelf}
		if a := c.walk(&validation.AllOf[i], node, isResourceRoot, dt, aw); a != nil {
			v.allOf = append(v.allOf, a)
		}
	}
	if len(v.compiled) == 0 && v.compileErr == nil && v.items == nil && v.additionalProperties == nil && len(v.properties) == 0 && len(v.allOf) == 0 {
		return nil
	}
	return v
}

func elemType(dt *DeclType, s *apiextensionsv1.JSONSchemaProps) *DeclType {
	if dt != nil && dt.ElemType != nil {
		return dt.ElemType
	}
	return SchemaDeclType(s, s.XEmbeddedResource)
}

// fieldType is a property's CEL type: the parent's field, or (for names
// CEL cannot spell, which rules on the parent cannot reach) the property's
// own conversion.
func fieldType(dt *DeclType, name string, s *apiextensionsv1.JSONSchemaProps) *DeclType {
	escaped, ok := Escape(name)
	if ok && dt != nil {
		if f, ok := dt.Fields[escaped]; ok {
			return f.Type
		}
		return nil
	}
	return SchemaDeclType(s, s.XEmbeddedResource)
}

func (c *compiler) compileNode(v *Validator, validation, node *apiextensionsv1.JSONSchemaProps, dt *DeclType, w walkCtx) {
	rulesPath := w.path.Child("x-kubernetes-validations")
	if w.report {
		if errs := checkRuleFields(validation.XValidations, node, rulesPath); len(errs) > 0 {
			// Like upstream, CEL is not tried on rules that are malformed.
			c.errs = append(c.errs, errs...)
			v.compileErr = errors.New("invalid x-kubernetes-validations")
			return
		}
	}
	if dt == nil {
		v.compileErr = errors.New("failed to convert to declType for CEL validation rules")
		if w.report {
			c.errs = append(c.errs, field.InternalError(rulesPath, fmt.Errorf("internal error: failed to construct type information for x-kubernetes-validations rules: unable to convert structural schema to CEL declarations")))
		}
		return
	}
	compiled, err := compileRules(node, validation.XValidations, dt)
	if err != nil {
		v.compileErr = err
		if w.report {
			c.errs = append(c.errs, field.InternalError(rulesPath, err))
		}
		return
	}
	v.compiled = compiled
	for _, cr := range compiled {
		v.usesOldSelf = v.usesOldSelf || cr.usesOldSelf
	}
	if w.report {
		c.reportRules(validation.XValidations, compiled, rulesPath, w)
	}
}

// reportRules turns compile results into the CRD's validation errors and
// adds the rules' estimated costs to the total.
func (c *compiler) reportRules(rules []apiextensionsv1.ValidationRule, compiled []compiledRule, rulesPath *field.Path, w walkCtx) {
	for i, cr := range compiled {
		rulePath := rulesPath.Index(i)
		cost := multiplyWithOverflowGuard(cr.maxCost, cr.maxCardinality)
		if w.cardinality != nil {
			cost = multiplyWithOverflowGuard(cr.maxCost, *w.cardinality)
		}
		if cost > StaticEstimatedCostLimit {
			c.errs = append(c.errs, field.Forbidden(rulePath.Child("rule"), costErrorMessage("estimated rule cost", cost, StaticEstimatedCostLimit)))
		}
		c.total.observe(rulePath.Child("rule"), cost)
		if cr.err != nil {
			if cr.err.internal {
				c.errs = append(c.errs, field.InternalError(rulePath.Child("rule"), cr.err))
			} else {
				c.errs = append(c.errs, field.Invalid(rulePath.Child("rule"), rules[i], cr.err.detail))
			}
		}
		if cr.messageErr != nil {
			c.errs = append(c.errs, field.Invalid(rulePath.Child("messageExpression"), rules[i], cr.messageErr.detail))
		} else if cr.message != nil {
			if cr.messageMaxCost > StaticEstimatedCostLimit {
				c.errs = append(c.errs, field.Forbidden(rulePath.Child("messageExpression"), costErrorMessage("estimated messageExpression cost", cr.messageMaxCost, StaticEstimatedCostLimit)))
			}
			c.total.observe(rulePath.Child("messageExpression"), cr.messageMaxCost)
		}
		if cr.err != nil {
			continue
		}
		if cr.usesOldSelf {
			if w.forbidOldSelf != nil {
				c.errs = append(c.errs, field.Invalid(rulePath.Child("rule"), rules[i].Rule, fmt.Sprintf("oldSelf cannot be used on the uncorrelatable portion of the schema within %v", w.forbidOldSelf)))
			}
		} else if rules[i].OptionalOldSelf != nil {
			c.errs = append(c.errs, field.Invalid(rulePath.Child("optionalOldSelf"), *rules[i].OptionalOldSelf, "may not be set if oldSelf is not used in rule"))
		}
	}
}

var (
	supportedReasons = []string{
		string(apiextensionsv1.FieldValueDuplicate), string(apiextensionsv1.FieldValueForbidden),
		string(apiextensionsv1.FieldValueInvalid), string(apiextensionsv1.FieldValueRequired),
	}
	ruleNewlineMatcher = regexp.MustCompile(`[\n\r]+`)
)

// checkRuleFields checks a node's rules as upstream's CRD validation does
// before compiling them: a rule, single-line messages, a known reason and
// a fieldPath that names a field of the schema.
func checkRuleFields(rules []apiextensionsv1.ValidationRule, s *apiextensionsv1.JSONSchemaProps, rulesPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		p := rulesPath.Index(i)
		trimmedRule, trimmedMsg := strings.TrimSpace(rule.Rule), strings.TrimSpace(rule.Message)
		switch {
		case trimmedRule == "":
			errs = append(errs, field.Required(p.Child("rule"), "rule is not specified"))
		case len(rule.Message) > 0 && trimmedMsg == "":
			errs = append(errs, field.Invalid(p.Child("message"), rule.Message, "must be non-empty if specified"))
		case ruleNewlineMatcher.MatchString(trimmedMsg):
			errs = append(errs, field.Invalid(p.Child("message"), rule.Message, "must not contain line breaks"))
		case ruleNewlineMatcher.MatchString(trimmedRule) && trimmedMsg == "":
			errs = append(errs, field.Required(p.Child("message"), "message must be specified if rule contains line breaks"))
		}
		if len(rule.MessageExpression) > 0 && strings.TrimSpace(rule.MessageExpression) == "" {
			errs = append(errs, field.Required(p.Child("messageExpression"), "messageExpression must be non-empty if specified"))
		}
		if rule.Reason != nil && !supportedReason(string(*rule.Reason)) {
			errs = append(errs, field.NotSupported(p.Child("reason"), *rule.Reason, supportedReasons))
		}
		if len(rule.FieldPath) > 0 && strings.TrimSpace(rule.FieldPath) == "" {
			errs = append(errs, field.Invalid(p.Child("fieldPath"), rule.FieldPath, "must be non-empty if specified"))
		}
		if ruleNewlineMatcher.MatchString(rule.FieldPath) {
			errs = append(errs, field.Invalid(p.Child("fieldPath"), rule.FieldPath, "must not contain line breaks"))
		}
		if len(rule.FieldPath) > 0 {
			if _, _, err := ValidFieldPath(rule.FieldPath, s, true); err != nil {
				errs = append(errs, field.Invalid(p.Child("fieldPath"), rule.FieldPath, "must be a valid path"))
			}
		}
	}
	return errs
}

func supportedReason(r string) bool {
	for _, s := range supportedReasons {
		if s == r {
			return true
		}
	}
	return false
}

// compileRules compiles the rules of one node whose value has CEL type dt.
func compileRules(node *apiextensionsv1.JSONSchemaProps, rules []apiextensionsv1.ValidationRule, dt *DeclType) ([]compiledRule, error) {
	// A fresh name each time keeps rule authors from depending on it.
	scoped := dt.MaybeAssignTypeName(fmt.Sprintf("selfType%d", time.Now().Nanosecond()))
	env, err := NewEnv([]*DeclType{scoped}, cel.Variable(ScopedVarName, scoped.CelType()), cel.Variable(OldScopedVarName, scoped.CelType()))
	if err != nil {
		return nil, err
	}
	var optEnv *cel.Env
	for _, r := range rules {
		if r.OptionalOldSelf != nil && *r.OptionalOldSelf {
			if optEnv, err = NewEnv([]*DeclType{scoped}, cel.Variable(ScopedVarName, scoped.CelType()),
				cel.Variable(OldScopedVarName, cel.OptionalType(scoped.CelType()))); err != nil {
				return nil, err
			}
			break
		}
	}
	estimator := newCostEstimator(scoped)
	card := maxCardinality(dt.MinSerializedSize)
	out := make([]compiledRule, len(rules))
	for i, r := range rules {
		e := env
		if r.OptionalOldSelf != nil && *r.OptionalOldSelf {
			e = optEnv
		}
		out[i] = compileRule(e, node, r, estimator, card)
	}
	return out, nil
}

func programOptions(estimator *CostEstimator) []cel.ProgramOption {
	return []cel.ProgramOption{cel.CostLimit(PerCallLimit), cel.CostTracking(estimator), cel.InterruptCheckFrequency(CheckFrequency)}
}

func compileRule(env *cel.Env, node *apiextensionsv1.JSONSchemaProps, rule apiextensionsv1.ValidationRule, estimator *CostEstimator, card uint64) compiledRule {
	var cr compiledRule
	if strings.TrimSpace(rule.Rule) == "" {
		return cr
	}
	ast, issues := env.Compile(rule.Rule)
	if issues != nil && issues.Err() != nil {
		cr.err = &ruleError{detail: "compilation failed: " + issues.String()}
		return cr
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		cr.err = &ruleError{detail: "cel expression must evaluate to a bool"}
		return cr
	}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == OldScopedVarName {
			cr.usesOldSelf = true
			break
		}
	}
	prog, err := env.Program(ast, programOptions(estimator)...)
	if err != nil {
		cr.err = &ruleError{detail: "program instantiation failed: " + err.Error()}
		return cr
	}
	est, err := env.EstimateCost(ast, estimator)
	if err != nil {
		cr.err = &ruleError{internal: true, detail: "cost estimation failed: " + err.Error()}
		return cr
	}
	cr.maxCost, cr.maxCardinality, cr.program = est.Max, card, prog
	if rule.MessageExpression != "" {
		cr.message, cr.messageMaxCost, cr.messageErr = compileMessageExpression(env, rule.MessageExpression, estimator)
	}
	if rule.FieldPath != "" {
		if p, _, err := ValidFieldPath(rule.FieldPath, node, true); err == nil {
			cr.fieldPath = p.String()
		}
	}
	return cr
}

func compileMessageExpression(env *cel.Env, expr string, estimator *CostEstimator) (cel.Program, uint64, *ruleError) {
	ast, issues := env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, 0, &ruleError{detail: "messageExpression compilation failed: " + issues.String()}
	}
	if !ast.OutputType().IsExactType(cel.StringType) {
		return nil, 0, &ruleError{detail: "messageExpression must evaluate to a string"}
	}
	prog, err := env.Program(ast, programOptions(estimator)...)
	if err != nil {
		return nil, 0, &ruleError{detail: "messageExpression instantiation failed: " + err.Error()}
	}
	est, err := env.EstimateCost(ast, estimator)
	if err != nil {
		return nil, 0, &ruleError{internal: true, detail: "cost estimation failed for messageExpression: " + err.Error()}
	}
	return prog, est.Max, nil
}
