package endpointslice

import (
	"cmp"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ControllerName is the managed-by value of the slices this controller
	// owns; slices with another value are someone else's and left alone.
	ControllerName = "endpointslice-controller.k8s.io"
	// LabelHeadless marks the slices of a service without a cluster IP, so
	// that proxies skip them.
	LabelHeadless = "service.kubernetes.io/headless"
)

// plan is the writes that take a service's slices from what exists to
// what is desired.
type plan struct {
	create, update, delete []*discovery.EndpointSlice
}

func (p *plan) empty() bool {
	return len(p.create) == 0 && len(p.update) == 0 && len(p.delete) == 0
}

// work is one existing slice being brought up to date.
type work struct {
	slice     *discovery.EndpointSlice
	endpoints []discovery.Endpoint
	changed   bool
}

// reconcile plans the writes for one service with as little churn as it
// can: an endpoint stays in the slice it is already in, a slice is only
// rewritten if one of its endpoints changed, new endpoints go first into
// slices being rewritten anyway, and a slice that would be deleted while
// another is created is reused instead.
func reconcile(svc *corev1.Service, existing []*discovery.EndpointSlice, desired []group, maxPerSlice int) plan {
	wantLabels, owner := sliceLabels(svc), ownerRef(svc)
	byKey := map[string][]*discovery.EndpointSlice{}
	for _, s := range existing {
		k := groupKey(s.AddressType, s.Ports)
		byKey[k] = append(byKey[k], s)
	}
	var p plan
	wanted := map[string]bool{}
	for i := range desired {
		g := &desired[i]
		wanted[g.key()] = true
		c, u, d := reconcileGroup(svc, g, byKey[g.key()], maxPerSlice)
		p.create, p.update, p.delete = append(p.create, c...), append(p.update, u...), append(p.delete, d...)
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		if !wanted[k] {
			p.delete = append(p.delete, byKey[k]...)
		}
	}
	p.reuseDeleted()
	if len(desired) == 0 {
		p.keepPlaceholder(svc)
	}
	// Slices kept as they are may still need their labels or owner fixed.
	touched := map[string]bool{}
	for _, s := range slices.Concat(p.update, p.delete) {
		touched[s.Name] = true
	}
	for _, s := range existing {
		if !touched[s.Name] && !metaUpToDate(s, wantLabels, owner) {
			p.update = append(p.update, s.DeepCopy())
		}
	}
	for _, s := range slices.Concat(p.create, p.update) {
		s.Labels = maps.Clone(wantLabels)
		s.OwnerReferences = []metav1.OwnerReference{owner}
	}
	byName := func(a, b *discovery.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(p.update, byName)
	slices.SortFunc(p.delete, byName)
	return p
}

// reconcileGroup plans one group against the existing slices of the same
// address type and ports.
func reconcileGroup(svc *corev1.Service, g *group, existing []*discovery.EndpointSlice, maxPerSlice int) (create, update, del []*discovery.EndpointSlice) {
	want := make(map[string]int, len(g.endpoints))
	for i := range g.endpoints {
		want[endpointKey(&g.endpoints[i])] = i
	}
	used := make([]bool, len(g.endpoints))
	existing = slices.Clone(existing)
	slices.SortFunc(existing, func(a, b *discovery.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	works := make([]*work, 0, len(existing))
	for _, s := range existing {
		w := &work{slice: s}
		for j := range s.Endpoints {
			i, ok := want[endpointKey(&s.Endpoints[j])]
			if !ok || used[i] || len(w.endpoints) >= maxPerSlice {
				w.changed = true
				continue
			}
			used[i] = true
			w.endpoints = append(w.endpoints, g.endpoints[i])
			if !apiequality.Semantic.DeepEqual(g.endpoints[i], s.Endpoints[j]) {
				w.changed = true
			}
		}
		works = append(works, w)
	}
	var remaining []discovery.Endpoint
	for i, u := range used {
		if !u {
			remaining = append(remaining, g.endpoints[i])
		}
	}
	for _, w := range works {
		if w.changed {
			remaining = fill(w, remaining, maxPerSlice)
		}
	}
	for len(remaining) > 0 {
		if len(remaining) < maxPerSlice {
			if w := fullestWithRoom(works, len(remaining), maxPerSlice); w != nil {
				w.changed = true
				remaining = fill(w, remaining, maxPerSlice)
				continue
			}
		}
		n := min(len(remaining), maxPerSlice)
		create = append(create, newSlice(svc, g.addressType, g.ports, slices.Clone(remaining[:n])))
		remaining = remaining[n:]
	}
	for _, w := range works {
		switch {
		case len(w.endpoints) == 0:
			del = append(del, w.slice)
		case w.changed:
			s := w.slice.DeepCopy()
			s.Endpoints = w.endpoints
			update = append(update, s)
		}
	}
	return create, update, del
}

func fill(w *work, remaining []discovery.Endpoint, maxPerSlice int) []discovery.Endpoint {
	n := min(len(remaining), maxPerSlice-len(w.endpoints))
	if n <= 0 {
		return remaining
	}
	w.endpoints = append(w.endpoints, remaining[:n]...)
	return remaining[n:]
}

// fullestWithRoom picks the unchanged slice that can take n more endpoints
// and has the least room left, so slices stay packed.
func fullestWithRoom(works []*work, n, maxPerSlice int) *work {
	var best *work
	for _, w := range works {
		if w.changed || maxPerSlice-len(w.endpoints) < n {
			continue
		}
		if best == nil || len(w.endpoints) > len(best.endpoints) {
			best = w
		}
	}
	return best
}

// reuseDeleted turns a create plus a delete of the same address type
// (address types are immutable) into one update: watchers see one change
// instead of two, and the slice count never briefly grows.
func (p *plan) reuseDeleted() {
	var creates []*discovery.EndpointSlice
	for _, c := range p.create {
		i := slices.IndexFunc(p.delete, func(d *discovery.EndpointSlice) bool { return d.AddressType == c.AddressType })
		if i < 0 {
			creates = append(creates, c)
			continue
		}
		s := p.delete[i].DeepCopy()
		s.Ports, s.Endpoints = c.Ports, c.Endpoints
		p.update = append(p.update, s)
		p.delete = slices.Delete(p.delete, i, i+1)
	}
	p.create = creates
}

// keepPlaceholder leaves a service without endpoints with exactly one empty
// slice, as upstream does, so that consumers can tell "no endpoints" from
// "not processed yet". An existing slice is emptied rather than replaced.
func (p *plan) keepPlaceholder(svc *corev1.Service) {
	at := primaryAddressType(svc)
	i := slices.IndexFunc(p.delete, func(d *discovery.EndpointSlice) bool {
		return d.AddressType == at && len(d.Endpoints) == 0 && len(d.Ports) == 0
	})
	if i < 0 {
		i = slices.IndexFunc(p.delete, func(d *discovery.EndpointSlice) bool { return d.AddressType == at })
	}
	if i < 0 {
		p.create = append(p.create, newSlice(svc, at, nil, nil))
		return
	}
	s := p.delete[i]
	p.delete = slices.Delete(p.delete, i, i+1)
	if len(s.Endpoints) > 0 || len(s.Ports) > 0 {
		s = s.DeepCopy()
		s.Endpoints, s.Ports = nil, nil
		p.update = append(p.update, s)
	}
}

func newSlice(svc *corev1.Service, at discovery.AddressType, ports []discovery.EndpointPort, eps []discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    svc.Name + "-",
			Namespace:       svc.Namespace,
			Labels:          sliceLabels(svc),
			OwnerReferences: []metav1.OwnerReference{ownerRef(svc)},
		},
		AddressType: at,
		Ports:       ports,
		Endpoints:   eps,
	}
}

// endpointKey identifies an endpoint across syncs by what cannot change
// without it becoming another endpoint: its address and its pod.
func endpointKey(ep *discovery.Endpoint) string {
	k := ""
	if len(ep.Addresses) > 0 {
		k = ep.Addresses[0]
	}
	if ep.TargetRef != nil {
		k += "|" + ep.TargetRef.Name
	}
	return k
}

// sliceLabels: the service's own labels are carried over, so label
// selectors on slices can follow the service's; the reserved ones are ours.
func sliceLabels(svc *corev1.Service) map[string]string {
	out := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		switch k {
		case discovery.LabelServiceName, discovery.LabelManagedBy, LabelHeadless:
		default:
			out[k] = v
		}
	}
	out[discovery.LabelServiceName] = svc.Name
	out[discovery.LabelManagedBy] = ControllerName
	if !hasClusterIP(svc) {
		out[LabelHeadless] = ""
	}
	return out
}

// hasClusterIP: a service without a virtual IP is headless for proxies,
// whether it asked for None or has not been allocated one.
func hasClusterIP(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

func ownerRef(svc *corev1.Service) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: new(true), BlockOwnerDeletion: new(true)}
}

func metaUpToDate(s *discovery.EndpointSlice, labels map[string]string, owner metav1.OwnerReference) bool {
	return maps.Equal(s.Labels, labels) && len(s.OwnerReferences) == 1 && apiequality.Semantic.DeepEqual(s.OwnerReferences[0], owner)
}
