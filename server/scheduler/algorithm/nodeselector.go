package algorithm

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// nodeSelector is a parsed list of ORed node selector terms; values of Gt
// and Lt are parsed once, not on every node.
type nodeSelector struct {
	terms []selectorTerm
}

type selectorTerm struct {
	exprs  []selectorReq
	fields []selectorReq
	// invalid terms (an unknown operator or field, a non-numeric Gt) match
	// nothing, as upstream ignores them.
	invalid bool
}

type selectorReq struct {
	key    string
	op     v1.NodeSelectorOperator
	values []string
	num    int64
}

func newNodeSelector(terms []v1.NodeSelectorTerm) *nodeSelector {
	ns := &nodeSelector{terms: make([]selectorTerm, 0, len(terms))}
	for i := range terms {
		ns.terms = append(ns.terms, newSelectorTerm(&terms[i]))
	}
	return ns
}

func newSelectorTerm(t *v1.NodeSelectorTerm) selectorTerm {
	var st selectorTerm
	parse := func(r v1.NodeSelectorRequirement, field bool) {
		req := selectorReq{key: r.Key, op: r.Operator, values: r.Values}
		switch r.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
		case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
			st.invalid = st.invalid || field
		case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
			if field || len(r.Values) != 1 {
				st.invalid = true
				break
			}
			n, err := strconv.ParseInt(r.Values[0], 10, 64)
			st.invalid = st.invalid || err != nil
			req.num = n
		default:
			st.invalid = true
		}
		if field && r.Key != metav1.ObjectNameField {
			st.invalid = true
		}
		if field {
			st.fields = append(st.fields, req)
		} else {
			st.exprs = append(st.exprs, req)
		}
	}
	for _, r := range t.MatchExpressions {
		parse(r, false)
	}
	for _, r := range t.MatchFields {
		parse(r, true)
	}
	return st
}

// matches reports whether any term selects node.
func (ns *nodeSelector) matches(node *v1.Node) bool {
	for i := range ns.terms {
		if ns.terms[i].matches(node) {
			return true
		}
	}
	return false
}

func (t *selectorTerm) matches(node *v1.Node) bool {
	if t.invalid || len(t.exprs)+len(t.fields) == 0 {
		return false
	}
	for i := range t.exprs {
		r := &t.exprs[i]
		v, ok := node.Labels[r.key]
		if !r.match(v, ok) {
			return false
		}
	}
	for i := range t.fields {
		if !t.fields[i].match(node.Name, true) {
			return false
		}
	}
	return true
}

func (r *selectorReq) match(v string, present bool) bool {
	switch r.op {
	case v1.NodeSelectorOpIn:
		return present && slices.Contains(r.values, v)
	case v1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.values, v)
	case v1.NodeSelectorOpExists:
		return present
	case v1.NodeSelectorOpDoesNotExist:
		return !present
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if !present {
			return false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		if r.op == v1.NodeSelectorOpGt {
			return n > r.num
		}
		return n < r.num
	}
	return false
}

// requiredNodeAffinity is the pod's nodeSelector AND its required node
// affinity.
type requiredNodeAffinity struct {
	labels   map[string]string
	selector *nodeSelector
}

func newRequiredNodeAffinity(pod *v1.Pod) *requiredNodeAffinity {
	r := &requiredNodeAffinity{labels: pod.Spec.NodeSelector}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		r.selector = newNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	return r
}

func (r *requiredNodeAffinity) matches(node *v1.Node) bool {
	for k, v := range r.labels {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	return r.selector == nil || r.selector.matches(node)
}

// nodeNames is the set of nodes the required terms can select at most when
// every term pins metadata.name (as the DaemonSet controller does), so the
// search need not walk every node; nil means no such limit.
func (r *requiredNodeAffinity) nodeNames() sets.Set[string] {
	if r.selector == nil {
		return nil
	}
	var out sets.Set[string]
	for _, t := range r.selector.terms {
		var names sets.Set[string]
		for _, f := range t.fields {
			if f.op != v1.NodeSelectorOpIn {
				continue
			}
			if s := sets.New(f.values...); names == nil {
				names = s
			} else {
				names = names.Intersection(s)
			}
		}
		if names == nil {
			return nil
		}
		if out == nil {
			out = sets.New[string]()
		}
		out = out.Union(names)
	}
	return out
}

// preferredNodeAffinity scores a node by the weights of the preferred
// terms it matches.
type preferredNodeAffinity struct {
	terms   []selectorTerm
	weights []int32
}

func newPreferredNodeAffinity(pod *v1.Pod) *preferredNodeAffinity {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return nil
	}
	p := &preferredNodeAffinity{}
	for _, t := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if t.Weight == 0 {
			continue
		}
		p.terms = append(p.terms, newSelectorTerm(&t.Preference))
		p.weights = append(p.weights, t.Weight)
	}
	return p
}

func (p *preferredNodeAffinity) score(node *v1.Node) int64 {
	var s int64
	for i := range p.terms {
		if p.terms[i].matches(node) {
			s += int64(p.weights[i])
		}
	}
	return s
}

// tolerates reports whether any toleration tolerates taint, operators Lt
// and Gt comparing integers.
func tolerates(tols []v1.Toleration, taint *v1.Taint) bool {
	for i := range tols {
		if toleratesOne(&tols[i], taint) {
			return true
		}
	}
	return false
}

func toleratesOne(t *v1.Toleration, taint *v1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", v1.TolerationOpEqual:
		return t.Value == taint.Value
	case v1.TolerationOpExists:
		return true
	case v1.TolerationOpLt, v1.TolerationOpGt:
		want, err1 := strconv.ParseInt(t.Value, 10, 64)
		got, err2 := strconv.ParseInt(taint.Value, 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if t.Operator == v1.TolerationOpLt {
			return got < want
		}
		return got > want
	}
	return false
}

// untoleratedTaint is the first taint with one of effects that the
// tolerations do not tolerate.
func untoleratedTaint(taints []v1.Taint, tols []v1.Toleration, effects ...v1.TaintEffect) (*v1.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if !slices.Contains(effects, t.Effect) {
			continue
		}
		if !tolerates(tols, t) {
			return t, true
		}
	}
	return nil, false
}
