package netproxy

import (
	"strings"

	"skiff/netproxy/nft"
)

// elemKey identifies a map element: its map and its key.
type elemKey struct {
	set   string
	addr  [16]byte
	proto nft.Proto
	port  uint16
}

func keyOf(e mapElement) elemKey {
	k := elemKey{set: e.set.Name, proto: e.el.Proto, port: e.el.Port}
	copy(k.addr[:], e.el.Addr.To16())
	return k
}

// slot is the traffic an element catches whatever its map: two service
// ports claiming the same slot (the same external IP, say) would make the
// kernel refuse the batch, so only one may own it.
func (k elemKey) slot() elemKey {
	k.set = ""
	return k
}

// fullSyncTx rewrites the whole table: the fixed chains and maps, every
// port's chains, sets, endpoint maps and elements, then removes the chains
// and sets the kernel has (existingChains, existingSets) but nobody wants.
//
// Every object is created before anything is written into one, since
// rules and elements name the chains and sets they lead to: all chains,
// then all sets and maps, then flushes and rules, then elements, then the
// removals. Affinity sets are created but never flushed: their entries
// are the clients' affinity.
func (f *family) fullSyncTx(table nft.Table, ports []*portRules, existingChains, existingSets []string) *nft.Tx {
	tx := nft.NewTx(table)
	// At scale the batch has hundreds of thousands of operations: growing
	// the slice by doubling would copy them over and over.
	tx.Ops = make([]nft.Op, 0, fullSyncOps(f, ports, len(existingChains)+len(existingSets)))
	tx.AddTable()
	for _, c := range f.chains {
		tx.AddChain(c.chain)
	}
	for _, p := range ports {
		for _, c := range p.chains {
			tx.AddChain(c.chain)
		}
	}
	for _, m := range f.maps {
		tx.AddSet(m)
	}
	for _, p := range ports {
		for _, s := range p.sets {
			tx.AddSet(s)
		}
		for _, m := range p.maps {
			tx.AddSet(m.set)
		}
	}
	for _, c := range f.chains {
		tx.FlushChain(c.chain.Name)
	}
	for _, p := range ports {
		for _, c := range p.chains {
			tx.FlushChain(c.chain.Name)
		}
	}
	for _, m := range f.maps {
		tx.FlushSet(m)
	}
	for _, p := range ports {
		for _, m := range p.maps {
			tx.FlushSet(m.set)
		}
	}
	addRules(tx, f.chains)
	for _, p := range ports {
		addRules(tx, p.chains)
	}
	for _, p := range ports {
		for _, m := range p.maps {
			tx.AddElements(m.set, m.elements...)
		}
	}
	byMap := make(map[string][]nft.Element, len(f.maps))
	for _, p := range ports {
		for _, e := range p.elements {
			byMap[e.set.Name] = append(byMap[e.set.Name], e.el)
		}
	}
	for _, m := range f.maps {
		tx.AddElements(m, byMap[m.Name]...)
	}
	staleChains, staleSets := f.stale(ports, existingChains, existingSets)
	removeObjects(tx, staleChains, staleSets)
	return tx
}

// fullSyncOps is the length of the full-sync batch, plus stale objects at
// most.
func fullSyncOps(f *family, ports []*portRules, stale int) int {
	n := 1 + 2*len(f.chains) + 3*len(f.maps) + 2*stale
	for _, c := range f.chains {
		n += len(c.rules)
	}
	for _, p := range ports {
		n += 2*len(p.chains) + len(p.sets) + 3*len(p.maps) + p.ruleCount()
	}
	return n
}

func addRules(tx *nft.Tx, chains []chainDef) {
	for _, c := range chains {
		for _, r := range c.rules {
			tx.AddRule(c.chain.Name, "", r...)
		}
	}
}

// removeObjects flushes, then deletes, chains and sets: a chain or set
// can only go once no rule or element refers to it any more. A stray
// endpoint map is flushed (its elements lead to endpoint chains) after
// the chains whose rules might use it.
func removeObjects(tx *nft.Tx, chains []string, sets []nft.Set) {
	for _, c := range chains {
		tx.FlushChain(c)
	}
	for _, s := range sets {
		tx.FlushSet(s)
	}
	for _, c := range chains {
		tx.DeleteChain(c)
	}
	for _, s := range sets {
		tx.DeleteSet(s)
	}
}

// stale lists the existing chains and sets that are not wanted. Anonymous
// sets ("__set0", "__map0") belong to rules and go with them.
func (f *family) stale(ports []*portRules, existingChains, existingSets []string) ([]string, []nft.Set) {
	if len(existingChains) == 0 && len(existingSets) == 0 {
		return nil, nil
	}
	chains := map[string]bool{}
	sets := map[string]bool{}
	for _, c := range f.chains {
		chains[c.chain.Name] = true
	}
	for _, m := range f.maps {
		sets[m.Name] = true
	}
	for _, p := range ports {
		for _, c := range p.chains {
			chains[c.chain.Name] = true
		}
		for _, s := range p.sets {
			sets[s.Name] = true
		}
		for _, m := range p.maps {
			sets[m.set.Name] = true
		}
	}
	var staleChains []string
	for _, c := range existingChains {
		if !chains[c] {
			staleChains = append(staleChains, c)
		}
	}
	var staleSets []nft.Set
	for _, s := range existingSets {
		if !sets[s] && !strings.HasPrefix(s, "__") {
			// Only the name matters to the kernel; the kind is for the
			// batch's rendering (flush map / flush set).
			isMap := strings.HasPrefix(s, endpointsPrefix) || strings.HasPrefix(s, localEndpointsPrefix)
			staleSets = append(staleSets, nft.Set{Name: s, Verdict: isMap})
		}
	}
	return staleChains, staleSets
}

// portChange is one service port's rules before (old) and after (new) a
// change; either is nil when the port did not or does not exist.
type portChange struct {
	old, new *portRules
}

// incrementalTx rewrites the changed ports only, in an order the kernel
// accepts within one batch: create the new chains, then the new affinity
// sets and every endpoint map (creating an existing one is a no-op); flush
// every chain the ports had (so nothing refers to what is going away) and
// every endpoint map they had or have; recreate affinity sets whose
// timeout changed; write the rules; fill the endpoint maps and swap the
// table maps' elements that disappeared or changed verdict; delete the
// maps and sets no longer needed (no rule uses them any more), then the
// chains (no element of a flushed map leads to them any more).
func (f *family) incrementalTx(table nft.Table, changes []portChange) *nft.Tx {
	tx := nft.NewTx(table)
	for _, ch := range changes {
		for _, c := range ch.new.chainList() {
			tx.AddChain(c.chain)
		}
	}
	for _, ch := range changes {
		oldSets := names(ch.old.setList(), func(s nft.Set) string { return s.Name })
		for _, s := range ch.new.setList() {
			if !oldSets[s.Name] {
				tx.AddSet(s)
			}
		}
		for _, m := range ch.new.mapList() {
			tx.AddSet(m.set)
		}
	}
	for _, ch := range changes {
		for _, c := range ch.old.chainList() {
			tx.FlushChain(c.chain.Name)
		}
	}
	for _, ch := range changes {
		for _, s := range changedSets(ch.old.setList(), ch.new.setList()) {
			tx.DeleteSet(s)
			tx.AddSet(s)
		}
	}
	for _, ch := range changes {
		newMaps := names(ch.new.mapList(), endpointMap.name)
		for _, m := range ch.old.mapList() {
			if !newMaps[m.set.Name] {
				tx.FlushSet(m.set)
			}
		}
		for _, m := range ch.new.mapList() {
			tx.FlushSet(m.set)
		}
	}
	for _, ch := range changes {
		addRules(tx, ch.new.chainList())
	}
	for _, ch := range changes {
		for _, m := range ch.new.mapList() {
			tx.AddElements(m.set, m.elements...)
		}
	}
	f.swapElements(tx, changes)
	for _, ch := range changes {
		newMaps := names(ch.new.mapList(), endpointMap.name)
		for _, m := range ch.old.mapList() {
			if !newMaps[m.set.Name] {
				tx.DeleteSet(m.set)
			}
		}
		newSets := names(ch.new.setList(), func(s nft.Set) string { return s.Name })
		for _, s := range ch.old.setList() {
			if !newSets[s.Name] {
				tx.DeleteSet(s)
			}
		}
	}
	for _, ch := range changes {
		newChains := names(ch.new.chainList(), func(c chainDef) string { return c.chain.Name })
		for _, c := range ch.old.chainList() {
			if !newChains[c.chain.Name] {
				tx.DeleteChain(c.chain.Name)
			}
		}
	}
	return tx
}

// names is the set of the names of objs.
func names[T any](objs []T, name func(T) string) map[string]bool {
	out := make(map[string]bool, len(objs))
	for _, o := range objs {
		out[name(o)] = true
	}
	return out
}

func (m endpointMap) name() string { return m.set.Name }

// changedSets are the sets of next that exist in prev with another
// definition (an affinity timeout that changed).
func changedSets(prev, next []nft.Set) []nft.Set {
	var out []nft.Set
	for _, n := range next {
		for _, p := range prev {
			if p.Name == n.Name && p.Timeout != n.Timeout {
				out = append(out, n)
			}
		}
	}
	return out
}

// swapElements deletes the old elements that are gone or changed verdict
// (one operation per map), then adds the new and changed ones.
func (f *family) swapElements(tx *nft.Tx, changes []portChange) {
	del := make(map[string][]nft.Element, len(f.maps))
	add := make(map[string][]nft.Element, len(f.maps))
	for _, ch := range changes {
		oldEls := ch.old.elementList()
		newEls := ch.new.elementList()
		prev := make(map[elemKey]nft.Verdict, len(oldEls))
		for _, e := range oldEls {
			prev[keyOf(e)] = e.el.Verdict
		}
		next := make(map[elemKey]nft.Verdict, len(newEls))
		for _, e := range newEls {
			next[keyOf(e)] = e.el.Verdict
		}
		for _, e := range oldEls {
			if v, ok := next[keyOf(e)]; !ok || v != e.el.Verdict {
				del[e.set.Name] = append(del[e.set.Name], e.el)
			}
		}
		for _, e := range newEls {
			if v, ok := prev[keyOf(e)]; !ok || v != e.el.Verdict {
				add[e.set.Name] = append(add[e.set.Name], e.el)
			}
		}
	}
	for _, m := range f.maps {
		tx.DeleteElements(m, del[m.Name]...)
	}
	for _, m := range f.maps {
		tx.AddElements(m, add[m.Name]...)
	}
}

// The accessors below read a nil *portRules as an absent port.

func (r *portRules) chainList() []chainDef {
	if r == nil {
		return nil
	}
	return r.chains
}

func (r *portRules) setList() []nft.Set {
	if r == nil {
		return nil
	}
	return r.sets
}

func (r *portRules) mapList() []endpointMap {
	if r == nil {
		return nil
	}
	return r.maps
}

func (r *portRules) elementList() []mapElement {
	if r == nil {
		return nil
	}
	return r.elements
}
