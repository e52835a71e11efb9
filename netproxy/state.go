package netproxy

import (
	"log/slog"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"skiff/netproxy/nft"
)

// table is one family's nftables table and what the proxier last
// installed in it: an incremental sync diffs against this, never against
// the kernel.
type table struct {
	fam  *family
	name nft.Table
	// ports are the installed service ports by id; byService lists the
	// port ids of each Service key.
	ports     map[string]*installedPort
	byService map[string][]string
	// owners gives the port id owning each element slot (elemKey.slot).
	owners map[elemKey]string
	// hostPorts are the installed host port mappings by slot id.
	hostPorts map[string]*installedHostPort
	// synced is set by the first successful full sync: before it nothing
	// is known about the conntrack table's history.
	synced bool
	// count is what is installed, the fixed chains and rules included.
	count objectCount
}

type objectCount struct{ chains, rules, elements int }

func (c *objectCount) add(r *portRules, sign int) {
	c.chains += sign * len(r.chains)
	c.rules += sign * r.ruleCount()
	c.elements += sign * r.elementCount()
}

// installedPort is a service port as written to the kernel.
type installedPort struct {
	sp *servicePort
	// rules are what was written; built is what portRules made, before
	// claimElements dropped elements whose slot another port owns. The
	// next sync reuses built when sp has not changed.
	rules, built *portRules
}

// portFor gives sp with its rules, reusing the installed ones when the
// port has not changed: at scale a periodic resync would otherwise spend
// most of its time rebuilding the very rules it is about to rewrite.
func (t *table) portFor(sp *servicePort) *installedPort {
	if old := t.ports[sp.id]; old != nil && old.sp.equal(sp) {
		return &installedPort{sp: sp, rules: old.built, built: old.built}
	}
	r := t.fam.portRules(sp)
	return &installedPort{sp: sp, rules: r, built: r}
}

func newTable(fam *family, name string) *table {
	return &table{
		fam:       fam,
		name:      nft.Table{Family: fam.nft, Name: name},
		ports:     map[string]*installedPort{},
		byService: map[string][]string{},
		owners:    map[elemKey]string{},
		hostPorts: map[string]*installedHostPort{},
	}
}

// serviceSource reads a Service and its EndpointSlices (from the informer
// caches in the proxier, from literals in tests).
type serviceSource func(key string) (*corev1.Service, []*discoveryv1.EndpointSlice)

// plan is one table's sync before it is applied: the batch, and the
// state to record once the kernel has taken it.
type plan struct {
	tx   *nft.Tx
	full bool
	// changes are the ports written (old nil: new port; new nil: removed),
	// in id order.
	changes []planned
	// owners replaces (full) or updates (incremental) table.owners.
	owners map[elemKey]string
	// hostPorts are the host port mappings written (full: all of them).
	hostPorts []hostPortChange
}

type planned struct {
	id       string
	old, new *installedPort
}

// planFull builds the full resync of the table from every Service, with
// no host ports. existingChains and existingSets are what the kernel has
// now.
func (t *table) planFull(keys []string, src serviceSource, opts modelOptions, existingChains, existingSets []string, log *slog.Logger) *plan {
	return t.planFullWith(keys, src, opts, nil, existingChains, existingSets, log)
}

// planFullWith is planFull with the node's host ports hps.
func (t *table) planFullWith(keys []string, src serviceSource, opts modelOptions, hps []HostPort, existingChains, existingSets []string, log *slog.Logger) *plan {
	var ports []*installedPort
	for _, key := range keys {
		svc, sls := src(key)
		for _, sp := range buildServicePorts(svc, sls, t.fam, opts) {
			ports = append(ports, t.portFor(sp))
		}
	}
	slices.SortFunc(ports, func(a, b *installedPort) int { return strings.Compare(a.sp.id, b.sp.id) })
	p := &plan{full: true, owners: map[elemKey]string{}}
	for _, ip := range ports {
		claimElements(ip, p.owners, nil, log)
	}
	rules := make([]*portRules, len(ports))
	wanted := make(map[string]bool, len(ports))
	for i, ip := range ports {
		rules[i] = ip.rules
		wanted[ip.sp.id] = true
		p.changes = append(p.changes, planned{id: ip.sp.id, old: t.ports[ip.sp.id], new: ip})
	}
	// Ports that are gone still matter to the conntrack cleanup.
	for id, old := range t.ports {
		if !wanted[id] {
			p.changes = append(p.changes, planned{id: id, old: old})
		}
	}
	p.hostPorts = t.planHostPorts(hps, true, log)
	for _, c := range p.hostPorts {
		if c.new != nil {
			rules = append(rules, c.new.rules)
		}
	}
	p.tx = t.fam.fullSyncTx(t.name, rules, existingChains, existingSets)
	return p
}

// planIncremental builds the batch rewriting the ports of the Services
// keys name, nil when none of them changed.
func (t *table) planIncremental(keys []string, src serviceSource, opts modelOptions, log *slog.Logger) *plan {
	return t.planIncrementalWith(keys, src, opts, nil, log)
}

// planIncrementalWith is planIncremental that also brings the host port
// mappings in line with *hps (nil: they did not change).
func (t *table) planIncrementalWith(keys []string, src serviceSource, opts modelOptions, hps *[]HostPort, log *slog.Logger) *plan {
	p := &plan{owners: map[elemKey]string{}}
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	for _, key := range keys {
		svc, sls := src(key)
		next := map[string]*installedPort{}
		for _, sp := range buildServicePorts(svc, sls, t.fam, opts) {
			next[sp.id] = t.portFor(sp)
		}
		for _, id := range t.byService[key] {
			if _, ok := next[id]; !ok {
				p.changes = append(p.changes, planned{id: id, old: t.ports[id]})
			}
		}
		for id, ip := range next {
			p.changes = append(p.changes, planned{id: id, old: t.ports[id], new: ip})
		}
	}
	slices.SortFunc(p.changes, func(a, b planned) int { return strings.Compare(a.id, b.id) })
	// Slots held by the changed ports are free for any of them to take.
	changing := make(map[string]bool, len(p.changes))
	for _, c := range p.changes {
		changing[c.id] = true
	}
	for _, c := range p.changes {
		if c.new != nil {
			claimElements(c.new, p.owners, func(slot elemKey) bool {
				owner, ok := t.owners[slot]
				return ok && !changing[owner]
			}, log)
		}
	}
	changes := make([]portChange, 0, len(p.changes))
	kept := p.changes[:0]
	for _, c := range p.changes {
		if c.old != nil && c.new != nil && reflect.DeepEqual(c.old.rules, c.new.rules) {
			continue
		}
		kept = append(kept, c)
		changes = append(changes, portChange{old: c.old.rulesOrNil(), new: c.new.rulesOrNil()})
	}
	p.changes = kept
	if hps != nil {
		p.hostPorts = t.planHostPorts(*hps, false, log)
		for _, c := range p.hostPorts {
			changes = append(changes, c.portChange())
		}
	}
	if len(changes) == 0 {
		return nil
	}
	p.tx = t.fam.incrementalTx(t.name, changes)
	return p
}

func (ip *installedPort) rulesOrNil() *portRules {
	if ip == nil {
		return nil
	}
	return ip.rules
}

// claimElements drops from ip's elements those whose slot is taken,
// either by a port claimed earlier (in owners) or as taken says, and
// records the others in owners. Two Services with the same external IP
// and port would otherwise have the whole batch refused.
func claimElements(ip *installedPort, owners map[elemKey]string, taken func(elemKey) bool, log *slog.Logger) {
	els := ip.rules.elements
	kept := els[:0:0]
	for _, e := range els {
		slot := keyOf(e).slot()
		if other, dup := owners[slot]; dup || (taken != nil && taken(slot)) {
			log.Warn("service port address already used by another service", "port", ip.sp.id, "other", other,
				"map", e.set.Name, "element", e.set.RenderKey(e.el))
			continue
		}
		owners[slot] = ip.sp.id
		kept = append(kept, e)
	}
	if len(kept) != len(els) {
		r := *ip.rules // built may be shared with the installed port
		r.elements = kept
		ip.rules = &r
	}
}

// commit records a plan the kernel has taken.
func (t *table) commit(p *plan) {
	if p.full {
		t.ports = map[string]*installedPort{}
		t.byService = map[string][]string{}
		t.owners = p.owners
		t.count = objectCount{}
		for _, c := range t.fam.chains {
			t.count.chains++
			t.count.rules += len(c.rules)
		}
		t.synced = true
	}
	for _, c := range p.changes {
		if c.old != nil && !p.full {
			t.count.add(c.old.rules, -1)
			for _, e := range c.old.rules.elements {
				if t.owners[keyOf(e).slot()] == c.id {
					delete(t.owners, keyOf(e).slot())
				}
			}
			delete(t.ports, c.id)
			t.byService[c.old.sp.service] = slices.DeleteFunc(t.byService[c.old.sp.service], func(id string) bool { return id == c.id })
			if len(t.byService[c.old.sp.service]) == 0 {
				delete(t.byService, c.old.sp.service)
			}
		}
		if c.new != nil {
			t.count.add(c.new.rules, +1)
			t.ports[c.id] = c.new
			t.byService[c.new.sp.service] = append(t.byService[c.new.sp.service], c.id)
		}
	}
	if !p.full {
		for slot, id := range p.owners {
			t.owners[slot] = id
		}
	}
	t.commitHostPorts(p.hostPorts, p.full)
}
