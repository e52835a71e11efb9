package resourcequota

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/apiserver"
	"skiff/server/quota"
	"skiff/server/registry"
)

// A write that fails after admission (validation, a lost store race, a
// name taken) was charged for nothing. Upstream leaves that to the
// controller's next full recalculation; here validation runs after
// admission, so an invalid object would hold quota for a resync period.
// Release gives the charge back, but only when it is provably still part
// of status.used: every write to the quota since the charge was this
// plugin's own (which add on top). After a write by anyone else (the
// controller's recalculation may already have dropped the charge) the
// charge is left for the controller: overcounting until it recalculates
// is safe, subtracting twice would let quota be overshot.

// charge is what one admitted object added to the quotas of a namespace.
type charge struct {
	ns     string
	at     time.Time
	quotas map[string]quotaCharge
}

type quotaCharge struct {
	delta   corev1.ResourceList
	foreign int // p.foreign of the quota when charged
}

func (p *Plugin) hold(obj runtime.Object, ns, name string, delta corev1.ResourceList) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.held[obj]
	if c == nil {
		c = &charge{ns: ns, at: time.Now(), quotas: map[string]quotaCharge{}}
		p.held[obj] = c
	}
	prev := c.quotas[name].delta
	c.quotas[name] = quotaCharge{delta: quota.Add(prev, delta), foreign: p.foreign[ns+"/"+name]}
}

// sweep forgets charges of writes that ended long ago (a create that
// succeeded is never released).
func (p *Plugin) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for obj, c := range p.held {
		if time.Since(c.at) > heldFor {
			delete(p.held, obj)
		}
	}
}

// Release implements apiserver.Releaser. The server calls it with the
// admitted object when its write did not happen (keep is the old object
// or nil), and with keep the admitted object when an update was written:
// then the charge stands.
func (p *Plugin) Release(ctx context.Context, _ *registry.Resource, obj, keep runtime.Object) {
	p.mu.Lock()
	p.init()
	if keep != nil {
		delete(p.held, keep)
	}
	c := p.held[obj]
	delete(p.held, obj)
	p.mu.Unlock()
	if c == nil {
		return
	}
	// The give-back takes its namespace's turn (queue.go), so it never
	// races this plugin's own charges; a Release that cannot get a turn
	// leaves the charge to the controller.
	_ = p.run(ctx, c.ns, newWork(apiserver.AdmissionAttributes{}, nil, c))
}

func (p *Plugin) giveBack(ctx context.Context, c *charge) {
	quotas, err := p.Quotas.List(ctx, c.ns)
	if err != nil {
		return
	}
	for _, q := range quotas {
		qc, ok := c.quotas[q.Name]
		if !ok {
			continue
		}
		cur := p.ownCopy(q, qc.foreign)
		if cur == nil {
			continue
		}
		updated := cur.DeepCopy()
		updated.Status.Used = quota.Mask(quota.SubtractWithNonNegativeResult(cur.Status.Used, qc.delta), quota.Names(cur.Status.Used))
		stored, err := p.Quotas.UpdateStatus(ctx, updated, cur.ResourceVersion)
		switch {
		case err == nil:
			p.wrote(stored)
		case apierrors.IsConflict(err):
			p.noteForeign(c.ns, map[string]bool{q.Name: true})
		}
	}
}

// ownCopy returns the quota as this plugin last wrote it, if no one else
// has written it since the charge (nil otherwise).
func (p *Plugin) ownCopy(listed *corev1.ResourceQuota, foreignAtCharge int) *corev1.ResourceQuota {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := listed.Namespace + "/" + listed.Name
	mine := p.latest[key]
	if mine == nil || mine.UID != listed.UID || p.foreign[key] != foreignAtCharge {
		return nil
	}
	if compareRV(listed.ResourceVersion, mine.ResourceVersion) > 0 {
		p.foreign[key]++
		delete(p.latest, key)
		return nil
	}
	return mine
}
