package cel

import (
	"fmt"
	"math"
	"sort"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream's CEL limits (k8s.io/apiserver/pkg/apis/cel and the CRD
// validation's static cost limits).
const (
	// PerCallLimit is the runtime cost one evaluation may spend.
	PerCallLimit = 1000000
	// RuntimeCELCostBudget is the runtime cost all rules of one object
	// validation may spend together.
	RuntimeCELCostBudget = 10000000
	// CheckFrequency is how many comprehension steps pass between checks
	// for cancellation.
	CheckFrequency = 100
	// MaxRequestSizeBytes bounds the size of unbounded lists, maps and
	// strings in cost estimates.
	MaxRequestSizeBytes = int64(3 * 1024 * 1024)
	// MaxEvaluatedMessageExpressionSizeBytes bounds a messageExpression's
	// result.
	MaxEvaluatedMessageExpressionSizeBytes = 5 * 1024
	// StaticEstimatedCostLimit is the largest estimated cost of one rule
	// (times the number of times it may run).
	StaticEstimatedCostLimit = 10000000
	// StaticEstimatedCRDCostLimit is the largest estimated cost of all the
	// rules of one schema.
	StaticEstimatedCRDCostLimit = 100000000
)

// The serialized sizes upstream's estimates use.
const (
	maxDurationSizeJSON    = 32
	maxDatetimeSizeJSON    = 32
	minDurationSizeJSON    = 3
	jsonDateSize           = 12
	minDatetimeSizeJSON    = 21
	minStringSize          = 2
	minBoolSize            = 4
	minNumberSize          = 1
	maxFormatSize          = 64
	maxNameFormatRegexSize = 128
)

// CostEstimator prices the Kubernetes library functions for both the
// static estimate (EstimateCallCost) and the runtime tracker (CallCost);
// SizeEstimator, if set, gives the sizes of schema-typed values.
type CostEstimator struct {
	SizeEstimator checker.CostEstimator
}

func ceilCost(size uint64, factor float64) uint64 {
	return uint64(math.Ceil(float64(size) * factor))
}

// CallCost implements interpreter.ActualCostEstimator.
func (l *CostEstimator) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	c := func(v uint64) *uint64 { return &v }
	if cost, ok := authzCallCost(function, args); ok {
		return &cost
	}
	switch function {
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes":
		var cost uint64
		if len(args) > 0 {
			cost += traversalCost(args[0])
		}
		return &cost
	case "url", "lowerAscii", "upperAscii", "substring", "trim":
		if len(args) >= 1 {
			return c(ceilCost(actualSize(args[0]), common.StringTraversalCostFactor))
		}
	case "replace", "split":
		if len(args) >= 1 {
			return c(ceilCost(actualSize(args[0]), 2*common.StringTraversalCostFactor))
		}
	case "join":
		if len(args) >= 1 {
			return c(ceilCost(actualSize(result), 2*common.StringTraversalCostFactor))
		}
	case "find", "findAll":
		if len(args) >= 2 {
			strCost := uint64(math.Ceil((1.0 + float64(actualSize(args[0]))) * common.StringTraversalCostFactor))
			return c(strCost * ceilCost(actualSize(args[1]), common.RegexStringLengthCostFactor))
		}
	case "cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver":
		if len(args) >= 1 {
			return c(ceilCost(actualSize(args[0]), common.StringTraversalCostFactor))
		}
	case "ip":
		if len(args) >= 1 {
			if overloadID == "cidr_ip" {
				return c(1)
			}
			return c(ceilCost(actualSize(args[0]), common.StringTraversalCostFactor))
		}
	case "ip.isCanonical":
		if len(args) >= 1 {
			return c(ceilCost(actualSize(args[0]), 2*common.StringTraversalCostFactor))
		}
	case "containsIP", "containsCIDR":
		if len(args) >= 2 {
			return c(cidrCallCost(function, overloadID, args))
		}
	case "validate":
		if len(args) >= 2 {
			if f, ok := args[0].Value().(FormatValue); ok {
				strCost := uint64(math.Ceil((1.0 + float64(actualSize(args[1]))) * common.StringTraversalCostFactor))
				return c(strCost * ceilCost(uint64(f.MaxRegexSize), common.RegexStringLengthCostFactor))
			}
		}
	case "format.named", "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
		"isLinkLocalUnicast", "isGlobalUnicast", "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan",
		"isLessThan", "compareTo", "add", "sub", "major", "minor", "patch",
		"getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery":
		return c(1)
	case "_==_":
		if len(args) == 2 {
			switch args[0].(type) {
			case QuantityValue, IPValue, CIDRValue, FormatValue, URLValue, SemverValue:
				return c(1)
			}
		}
	}
	return nil
}

// cidrCallCost is the runtime cost of containsIP and containsCIDR.
func cidrCallCost(function, overloadID string, args []ref.Val) uint64 {
	cidrSize, otherSize := actualSize(args[0]), actualSize(args[1])
	cost := ceilCost(cidrSize+cidrSize, common.StringTraversalCostFactor)
	if function == "containsCIDR" {
		cost += ceilCost(cidrSize, common.StringTraversalCostFactor) + 1
	}
	if overloadID == "cidr_contains_ip_string" || overloadID == "cidr_contains_cidr_string" {
		cost += ceilCost(otherSize, common.StringTraversalCostFactor)
	}
	return cost
}

// EstimateCallCost implements checker.CostEstimator.
func (l *CostEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	unit := &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}}
	if est := l.estimateAuthzCall(function, args); est != nil {
		return est
	}
	switch function {
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes":
		if target != nil {
			return l.estimateListTraversal(function, *target)
		}
	case "url":
		if len(args) == 1 {
			sz := l.sizeEstimate(args[0])
			return &checker.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(common.StringTraversalCostFactor), ResultSize: &sz}
		}
	case "lowerAscii", "upperAscii", "substring", "trim":
		if target != nil {
			sz := l.sizeEstimate(*target)
			return &checker.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(common.StringTraversalCostFactor), ResultSize: &sz}
		}
	case "replace":
		if target != nil && len(args) >= 2 {
			return l.estimateReplace(*target, args)
		}
	case "split":
		if target != nil {
			return l.estimateSplit(*target, args)
		}
	case "join":
		if target != nil {
			return l.estimateJoin(*target, args)
		}
	case "find", "findAll":
		if target != nil && len(args) >= 1 {
			sz := l.sizeEstimate(*target)
			strCost := sz.Add(checker.SizeEstimate{Min: 1, Max: 1}).MultiplyByCostFactor(common.StringTraversalCostFactor)
			regexCost := l.sizeEstimate(args[0]).MultiplyByCostFactor(common.RegexStringLengthCostFactor)
			return &checker.CallEstimate{CostEstimate: strCost.Multiply(regexCost), ResultSize: &checker.SizeEstimate{Min: 0, Max: sz.Max}}
		}
	case "cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver":
		if len(args) >= 1 {
			return &checker.CallEstimate{CostEstimate: l.sizeEstimate(args[0]).MultiplyByCostFactor(common.StringTraversalCostFactor)}
		}
	case "ip":
		if overloadID == "cidr_ip" {
			return unit
		}
		if len(args) >= 1 {
			return &checker.CallEstimate{CostEstimate: l.sizeEstimate(args[0]).MultiplyByCostFactor(common.StringTraversalCostFactor)}
		}
	case "ip.isCanonical":
		if len(args) >= 1 {
			return &checker.CallEstimate{CostEstimate: l.sizeEstimate(args[0]).MultiplyByCostFactor(2 * common.StringTraversalCostFactor)}
		}
	case "containsIP", "containsCIDR":
		if len(args) >= 1 {
			// An IP is 4 or 16 bytes; a comparison walks both.
			sz := checker.SizeEstimate{Min: 4, Max: 16}
			cost := sz.Add(sz).MultiplyByCostFactor(common.StringTraversalCostFactor)
			if function == "containsCIDR" {
				cost = cost.Add(sz.MultiplyByCostFactor(common.StringTraversalCostFactor)).Add(checker.CostEstimate{Min: 1, Max: 1})
			}
			if overloadID == "cidr_contains_ip_string" || overloadID == "cidr_contains_cidr_string" {
				cost = cost.Add(checker.CostEstimate(l.sizeEstimate(args[0])).MultiplyByCostFactor(common.StringTraversalCostFactor))
			}
			return &checker.CallEstimate{CostEstimate: cost}
		}
	case "validate":
		if len(args) >= 1 {
			sz := l.sizeEstimate(args[0])
			return &checker.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(common.StringTraversalCostFactor).MultiplyByCostFactor(maxNameFormatRegexSize * common.RegexStringLengthCostFactor)}
		}
	case "format.named", "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
		"isLinkLocalUnicast", "isGlobalUnicast", "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan",
		"isLessThan", "compareTo", "add", "sub", "major", "minor", "patch",
		"getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery":
		return unit
	case "_==_":
		if len(args) == 2 {
			return l.estimateEquals(args[0], args[1])
		}
	}
	return nil
}

// estimateListTraversal prices the Kubernetes list functions: one pass
// over the list, strings costing by their length.
func (l *CostEstimator) estimateListTraversal(function string, target checker.AstNode) *checker.CallEstimate {
	elCost := checker.CostEstimate{Min: 1, Max: 1}
	if elNode := l.listElementNode(target); elNode != nil {
		if k := elNode.Type().Kind(); k == types.StringKind || k == types.BytesKind {
			elCost = elCost.Add(l.sizeEstimate(elNode).MultiplyByCostFactor(common.StringTraversalCostFactor))
		}
		return &checker.CallEstimate{CostEstimate: l.sizeEstimate(target).MultiplyByCost(elCost)}
	} else if function == "includes" {
		return &checker.CallEstimate{CostEstimate: l.sizeEstimate(target).MultiplyByCost(elCost)}
	}
	return &checker.CallEstimate{CostEstimate: l.sizeEstimate(target).MultiplyByCostFactor(common.StringTraversalCostFactor)}
}

func (l *CostEstimator) estimateSplit(target checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	sz := l.sizeEstimate(target)
	maxParts := sz.Max
	if len(args) > 1 {
		if v := args[1].Expr().AsLiteral(); v != nil {
			if i, ok := v.Value().(int64); ok {
				maxParts = uint64(i)
			}
		}
	}
	return &checker.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(2 * common.StringTraversalCostFactor), ResultSize: &checker.SizeEstimate{Min: 0, Max: maxParts}}
}

func (l *CostEstimator) estimateEquals(lhs, rhs checker.AstNode) *checker.CallEstimate {
	if lhs.Type().Equal(rhs.Type()) != types.True {
		return nil
	}
	if isAuthzType(lhs.Type()) {
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}}
	}
	switch lhs.Type().TypeName() {
	case IPType.TypeName(), CIDRType.TypeName(), QuantityType.TypeName(), SemverType.TypeName():
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}}
	case FormatType.TypeName():
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: maxFormatSize}.MultiplyByCostFactor(common.StringTraversalCostFactor)}
	case URLType.TypeName():
		size := checker.SizeEstimate{Min: 1, Max: 1}
		if rs := rhs.ComputedSize(); rs != nil {
			size = rs.Union(*rs)
		}
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: size.Max}.MultiplyByCostFactor(common.StringTraversalCostFactor)}
	}
	return nil
}

func (l *CostEstimator) estimateReplace(target checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	sz := l.sizeEstimate(target)
	toReplaceSz := l.sizeEstimate(args[0])
	replaceWithSz := l.sizeEstimate(args[1])
	var replaceCount, retainedSz checker.SizeEstimate
	// An empty string to replace matches between every character.
	switch {
	case toReplaceSz.Min == 0:
		replaceCount.Max = sz.Max
		if sz.Max < math.MaxUint64 {
			replaceCount.Max = sz.Max + 1
		}
		retainedSz.Max = sz.Max
	case replaceWithSz.Max <= toReplaceSz.Min:
		retainedSz.Max = sz.Max
	default:
		replaceCount.Max = uint64(math.Ceil(float64(sz.Max) / float64(toReplaceSz.Min)))
	}
	switch {
	case toReplaceSz.Max == 0:
		replaceCount.Min = sz.Min
		if sz.Min < math.MaxUint64 {
			replaceCount.Min = sz.Min + 1
		}
		retainedSz.Min = sz.Min
	case toReplaceSz.Max <= replaceWithSz.Min:
		retainedSz.Min = sz.Min
	default:
		replaceCount.Min = uint64(math.Ceil(float64(sz.Min) / float64(toReplaceSz.Max)))
	}
	size := replaceCount.Multiply(replaceWithSz).Add(retainedSz)
	return &checker.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(2 * common.StringTraversalCostFactor), ResultSize: &size}
}

func (l *CostEstimator) estimateJoin(target checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	var sz checker.SizeEstimate
	listSize := l.sizeEstimate(target)
	if elNode := l.listElementNode(target); elNode != nil {
		sz = listSize.Multiply(l.sizeEstimate(elNode))
	}
	if len(args) > 0 {
		sepSize := l.sizeEstimate(args[0])
		var minSep, maxSep uint64
		if listSize.Min > 0 {
			minSep = listSize.Min - 1
		}
		if listSize.Max > 0 {
			maxSep = listSize.Max - 1
		}
		sz = sz.Add(sepSize.Multiply(checker.SizeEstimate{Min: minSep, Max: maxSep}))
	}
	return &checker.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(common.StringTraversalCostFactor), ResultSize: &sz}
}

// EstimateSize implements checker.CostEstimator.
func (l *CostEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	if l.SizeEstimator != nil {
		return l.SizeEstimator.EstimateSize(element)
	}
	return nil
}

func (l *CostEstimator) sizeEstimate(t checker.AstNode) checker.SizeEstimate {
	if sz := t.ComputedSize(); sz != nil {
		return *sz
	}
	if sz := l.EstimateSize(t); sz != nil {
		return *sz
	}
	return checker.SizeEstimate{Min: 0, Max: math.MaxUint64}
}

func (l *CostEstimator) listElementNode(list checker.AstNode) checker.AstNode {
	params := list.Type().Parameters()
	if len(params) == 0 {
		return nil
	}
	var path []string
	if p := list.Path(); p != nil {
		path = append(append(make([]string, 0, len(p)+1), p...), "@items")
	}
	return &itemsNode{path: path, t: params[0]}
}

// itemsNode stands for "an element of this list" so that element sizes
// can be looked up by path.
type itemsNode struct {
	path []string
	t    *types.Type
}

func (i *itemsNode) Path() []string                      { return i.path }
func (i *itemsNode) Type() *types.Type                   { return i.t }
func (i *itemsNode) Expr() ast.Expr                      { return nil }
func (i *itemsNode) ComputedSize() *checker.SizeEstimate { return nil }

func actualSize(value ref.Val) uint64 {
	if sz, ok := value.(traits.Sizer); ok {
		if n, ok := sz.Size().(types.Int); ok {
			return uint64(n)
		}
	}
	return 1
}

func traversalCost(v ref.Val) uint64 {
	switch vt := v.(type) {
	case types.String:
		return uint64(float64(len(string(vt))) * common.StringTraversalCostFactor)
	case types.Bytes:
		return uint64(float64(len([]byte(vt))) * common.StringTraversalCostFactor)
	case traits.Lister:
		cost := uint64(0)
		for it := vt.Iterator(); it.HasNext() == types.True; {
			cost += traversalCost(it.Next())
		}
		return cost
	case traits.Mapper:
		cost := uint64(0)
		for it := vt.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			cost += traversalCost(k) + traversalCost(vt.Get(k))
		}
		return cost
	}
	return 1
}

// schemaSizeEstimator sizes self's fields from the schema's declared (or
// estimated) maxItems, maxProperties and maxLength.
type schemaSizeEstimator struct{ root *DeclType }

func (c *schemaSizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 {
		return nil
	}
	node := c.root
	for _, name := range path[1:] { // path[0] is "self"
		switch name {
		case "@items", "@values":
			node = node.ElemType
		case "@keys":
			node = node.KeyType
		default:
			f, ok := node.Fields[name]
			if !ok {
				return nil
			}
			node = f.Type
		}
		if node == nil {
			return nil
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(node.MaxElements)}
}

func (c *schemaSizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

func newCostEstimator(root *DeclType) *CostEstimator {
	return &CostEstimator{SizeEstimator: &schemaSizeEstimator{root: root}}
}

// maxCardinality is how often a value of at least minSize bytes can occur
// in a request: the factor for rules under unbounded lists and maps.
func maxCardinality(minSize int64) uint64 {
	return uint64(MaxRequestSizeBytes / (minSize + 1))
}

func multiplyWithOverflowGuard(base, cardinality uint64) uint64 {
	if base == 0 {
		return 0
	}
	if math.MaxUint64/base < cardinality {
		return math.MaxUint64
	}
	return base * cardinality
}

func costErrorMessage(costName string, cost, limit uint64) string {
	exceed := float64(cost) / float64(limit)
	var factor string
	switch {
	case exceed > 100.0:
		factor = "more than 100x"
	case exceed < 1.5:
		factor = fmt.Sprintf("%fx", exceed)
	default:
		factor = fmt.Sprintf("%.1fx", exceed)
	}
	return fmt.Sprintf("%s exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)", costName, factor)
}

// totalCost sums the estimated cost of all the rules of a schema and keeps
// the (at most 4) most expensive ones that contribute at least 1% of the
// limit, which upstream names when the total is over.
type totalCost struct {
	total         uint64
	mostExpensive []ruleCost
}

type ruleCost struct {
	path *field.Path
	cost uint64
}

func (c *totalCost) observe(path *field.Path, cost uint64) {
	if math.MaxUint64-c.total < cost {
		c.total = math.MaxUint64
	} else {
		c.total += cost
	}
	if cost < StaticEstimatedCRDCostLimit/100 {
		return
	}
	c.mostExpensive = append(c.mostExpensive, ruleCost{path: path, cost: cost})
	sort.SliceStable(c.mostExpensive, func(i, j int) bool { return c.mostExpensive[i].cost > c.mostExpensive[j].cost })
	if len(c.mostExpensive) > 4 {
		c.mostExpensive = c.mostExpensive[:4]
	}
}

func (c *totalCost) errors(fld *field.Path) field.ErrorList {
	if c.total <= StaticEstimatedCRDCostLimit {
		return nil
	}
	var errs field.ErrorList
	for _, e := range c.mostExpensive {
		errs = append(errs, field.Forbidden(e.path, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"))
	}
	return append(errs, field.Forbidden(fld, costErrorMessage("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", c.total, StaticEstimatedCRDCostLimit)))
}
