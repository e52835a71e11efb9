package netproxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"skiff/netproxy/nft"
)

// simKernel is a ruleWriter that keeps one table in memory and refuses a
// batch the way the kernel does when its order is wrong: a rule or element
// naming a chain or set that does not exist, a chain or set deleted while
// something refers to it, an element deleted that is not there or added
// over one with another verdict. A refused batch changes nothing. Like the
// kernel's, its generation counts the commits: every accepted batch and
// every edit made "by hand" through the methods below.
type simKernel struct {
	mu     sync.Mutex
	tables map[nft.Table]*simTable
	// batches are the transactions applied (or refused), in order.
	batches []*nft.Tx
	// fail, if set, refuses a batch before looking at it (it runs with
	// the kernel locked).
	fail func(*nft.Tx) error
	// gen is the ruleset generation; genErr, if set, is what reading it
	// returns instead.
	gen    uint32
	genErr error
}

type simTable struct {
	chains map[string][]nft.Rule
	sets   map[string]map[string]nft.Verdict
	fam    nft.Family
}

func newSimKernel() *simKernel { return &simKernel{tables: map[nft.Table]*simTable{}} }

func (k *simKernel) Close() error { return nil }

func (k *simKernel) Generation() (uint32, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen, k.genErr
}

// commitByOther bumps the generation as another program's commit (to
// any table) would.
func (k *simKernel) commitByOther() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
}

func (k *simKernel) Existing(t nft.Table) ([]string, []string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.tables[t]
	if st == nil {
		return nil, nil, nil
	}
	return slices.Sorted(maps.Keys(st.chains)), slices.Sorted(maps.Keys(st.sets)), nil
}

func (k *simKernel) Apply(tx *nft.Tx) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.batches = append(k.batches, tx)
	if k.fail != nil {
		if err := k.fail(tx); err != nil {
			return err
		}
	}
	cur := k.tables[tx.Table]
	next := &simTable{chains: map[string][]nft.Rule{}, sets: map[string]map[string]nft.Verdict{}, fam: tx.Table.Family}
	if cur != nil {
		for n, rs := range cur.chains {
			next.chains[n] = slices.Clone(rs)
		}
		for n, els := range cur.sets {
			next.sets[n] = maps.Clone(els)
		}
	}
	exists := cur != nil
	for i, op := range tx.Ops {
		if op.Kind == nft.OpAddTable {
			exists = true
			continue
		}
		if !exists {
			return fmt.Errorf("op %d: no table", i)
		}
		if err := next.apply(op); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, strings.TrimSpace(renderOp(tx, op)), err)
		}
	}
	k.tables[tx.Table] = next
	k.gen++
	return nil
}

func renderOp(tx *nft.Tx, op nft.Op) string {
	one := &nft.Tx{Table: tx.Table, Ops: []nft.Op{op}}
	return one.String()
}

func (s *simTable) apply(op nft.Op) error {
	switch op.Kind {
	case nft.OpAddChain:
		if _, ok := s.chains[op.Chain.Name]; !ok {
			s.chains[op.Chain.Name] = nil
		}
	case nft.OpFlushChain:
		if _, ok := s.chains[op.Chain.Name]; !ok {
			return fmt.Errorf("flush of missing chain")
		}
		s.chains[op.Chain.Name] = nil
	case nft.OpDeleteChain:
		if _, ok := s.chains[op.Chain.Name]; !ok {
			return fmt.Errorf("delete of missing chain")
		}
		delete(s.chains, op.Chain.Name)
		if by := s.chainUser(op.Chain.Name); by != "" {
			return fmt.Errorf("chain still used by %s", by)
		}
	case nft.OpAddRule:
		if _, ok := s.chains[op.Rule.Chain]; !ok {
			return fmt.Errorf("rule in missing chain")
		}
		for _, c := range ruleChains(op.Rule) {
			if _, ok := s.chains[c]; !ok {
				return fmt.Errorf("rule names missing chain %s", c)
			}
		}
		for _, set := range ruleSets(op.Rule) {
			if _, ok := s.sets[set]; !ok {
				return fmt.Errorf("rule names missing set %s", set)
			}
		}
		s.chains[op.Rule.Chain] = append(s.chains[op.Rule.Chain], op.Rule)
	default:
		return s.applySetOp(op)
	}
	return nil
}

// applySetOp applies an operation on a set or its elements.
func (s *simTable) applySetOp(op nft.Op) error {
	switch op.Kind {
	case nft.OpAddSet:
		if _, ok := s.sets[op.Set.Name]; !ok {
			s.sets[op.Set.Name] = map[string]nft.Verdict{}
		}
	case nft.OpFlushSet:
		if _, ok := s.sets[op.Set.Name]; !ok {
			return fmt.Errorf("flush of missing set")
		}
		s.sets[op.Set.Name] = map[string]nft.Verdict{}
	case nft.OpDeleteSet:
		if _, ok := s.sets[op.Set.Name]; !ok {
			return fmt.Errorf("delete of missing set")
		}
		for c, rs := range s.chains {
			for _, r := range rs {
				if slices.Contains(ruleSets(r), op.Set.Name) {
					return fmt.Errorf("set still used by a rule of %s", c)
				}
			}
		}
		delete(s.sets, op.Set.Name)
	case nft.OpAddElements:
		els, ok := s.sets[op.Set.Name]
		if !ok {
			return fmt.Errorf("elements for missing set")
		}
		for _, e := range op.Elements {
			k := op.Set.RenderKey(e)
			if v, dup := els[k]; dup && v != e.Verdict {
				return fmt.Errorf("element %s exists with verdict %s", k, v)
			}
			if c := e.Verdict.Chain; c != "" {
				if _, ok := s.chains[c]; !ok {
					return fmt.Errorf("element %s leads to missing chain %s", k, c)
				}
			}
			els[k] = e.Verdict
		}
	case nft.OpDeleteElements:
		els, ok := s.sets[op.Set.Name]
		if !ok {
			return fmt.Errorf("element deletion in missing set")
		}
		for _, e := range op.Elements {
			k := op.Set.RenderKey(e)
			if _, ok := els[k]; !ok {
				return fmt.Errorf("deleted element %s is not there", k)
			}
			delete(els, k)
		}
	default:
		return fmt.Errorf("unexpected op kind %d", op.Kind)
	}
	return nil
}

// chainUser names a rule or element still leading to chain ("" if none).
func (s *simTable) chainUser(chain string) string {
	for c, rs := range s.chains {
		for _, r := range rs {
			if slices.Contains(ruleChains(r), chain) {
				return "a rule of " + c
			}
		}
	}
	for set, els := range s.sets {
		for k, v := range els {
			if v.Chain == chain {
				return "element " + k + " of " + set
			}
		}
	}
	return ""
}

func ruleChains(r nft.Rule) []string {
	var out []string
	for _, st := range r.Stmts {
		switch v := st.(type) {
		case nft.Verdict:
			if v.Chain != "" {
				out = append(out, v.Chain)
			}
		case nft.NumgenVMap:
			for _, t := range v.Targets {
				out = append(out, t.Chain)
			}
		}
	}
	return out
}

func ruleSets(r nft.Rule) []string {
	var out []string
	for _, st := range r.Stmts {
		switch v := st.(type) {
		case nft.VMap:
			out = append(out, v.Map)
		case nft.MatchSAddrInSet:
			out = append(out, v.Set)
		case nft.UpdateSet:
			out = append(out, v.Set)
		case nft.NumgenVMap:
			if v.Map != "" {
				out = append(out, v.Map)
			}
		}
	}
	return out
}

// dump renders the table canonically: chains by name with their rules in
// order, sets by name with their elements sorted.
func (k *simKernel) dump(t nft.Table) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.tables[t]
	if st == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range slices.Sorted(maps.Keys(st.chains)) {
		fmt.Fprintf(&b, "chain %s\n", c)
		for _, r := range st.chains[c] {
			parts := make([]string, len(r.Stmts))
			for i, s := range r.Stmts {
				parts[i] = s.Render(st.fam)
			}
			fmt.Fprintf(&b, "  %s\n", strings.Join(parts, " "))
		}
	}
	for _, s := range slices.Sorted(maps.Keys(st.sets)) {
		fmt.Fprintf(&b, "set %s\n", s)
		for _, e := range slices.Sorted(maps.Keys(st.sets[s])) {
			fmt.Fprintf(&b, "  %s : %s\n", e, st.sets[s][e])
		}
	}
	return b.String()
}

// deleteChainByHand removes a chain and everything leading to it, as an
// admin's nft commands would.
func (k *simKernel) deleteChainByHand(t nft.Table, chain string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.tables[t]
	for c, rs := range st.chains {
		st.chains[c] = slices.DeleteFunc(rs, func(r nft.Rule) bool { return slices.Contains(ruleChains(r), chain) })
	}
	for _, els := range st.sets {
		maps.DeleteFunc(els, func(_ string, v nft.Verdict) bool { return v.Chain == chain })
	}
	delete(st.chains, chain)
	k.gen++
}

// deleteElementByHand removes the element whose rendered key is key from
// a set or map, as `nft delete element` would.
func (k *simKernel) deleteElementByHand(t nft.Table, set, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	els := k.tables[t].sets[set]
	if _, ok := els[key]; !ok {
		return false
	}
	delete(els, key)
	k.gen++
	return true
}

func (k *simKernel) txs() []*nft.Tx {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.batches)
}
