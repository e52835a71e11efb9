// Package resourcequota is the ResourceQuota admission check: a write that
// adds usage is charged to every quota covering it, through a
// compare-and-swap on the quota's status, and refused with upstream's
// messages when it would exceed one. The quota controller recalculates
// status.used from the objects that exist; admission only ever adds, so
// quota is never overshot between two recalculations.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/apiserver"
	"skiff/server/quota"
)

// QuotaAccess reads and writes the ResourceQuotas of a namespace.
type QuotaAccess interface {
	// List returns the quotas of a namespace. It may serve a cache that
	// lags: the plugin prefers the newer copies it wrote itself.
	List(ctx context.Context, namespace string) ([]*corev1.ResourceQuota, error)
	// UpdateStatus writes q's status if the stored quota's
	// resourceVersion is still expectedResourceVersion, and returns the
	// stored result. A lost race is an error apierrors.IsConflict knows.
	UpdateStatus(ctx context.Context, q *corev1.ResourceQuota, expectedResourceVersion string) (*corev1.ResourceQuota, error)
}

const (
	// conflictRetries bounds re-reading after lost races with writers
	// outside this plugin (the controller, other API servers); writes of
	// this plugin are serialized per namespace and do not race.
	conflictRetries = 5
	// waitLimit is how long a write waits for its namespace's turn, as
	// upstream's evaluator waits.
	waitLimit = 10 * time.Second
	// heldFor is how long a charge is remembered for Release; the write it
	// belongs to ends long before.
	heldFor = time.Minute
)

// Plugin is the admission check. Quotas and Evaluators must be set; the
// rest is its own state.
type Plugin struct {
	Quotas     QuotaAccess
	Evaluators *quota.Registry

	mu    sync.Mutex
	locks map[string]*nsLock
	// latest is the newest copy of each quota this plugin wrote, and
	// foreign counts writes by others it noticed (see release.go).
	latest  map[string]*corev1.ResourceQuota
	foreign map[string]int
	held    map[runtime.Object]*charge
}

var _ apiserver.Admitter = (*Plugin)(nil)
var _ apiserver.Releaser = (*Plugin)(nil)

func (p *Plugin) init() {
	if p.locks == nil {
		p.locks = map[string]*nsLock{}
		p.latest = map[string]*corev1.ResourceQuota{}
		p.foreign = map[string]int{}
		p.held = map[runtime.Object]*charge{}
	}
}

// Admit charges a create or update to the quotas that cover it.
func (p *Plugin) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Op != apiserver.OpCreate && a.Op != apiserver.OpUpdate || a.Resource == nil || !a.Resource.Namespaced || a.Object == nil {
		return nil
	}
	acc, err := meta.Accessor(a.Object)
	if err != nil || acc.GetNamespace() == "" {
		return nil
	}
	gr := a.Resource.GVR().GroupResource()
	if quota.Ignored(gr) {
		return nil
	}
	ev := p.Evaluators.For(gr)
	if !ev.Handles(quota.Operation(a.Op), a.Subresource, a.Object, a.Old) {
		return nil
	}
	ns := acc.GetNamespace()
	unlock, err := p.lock(ctx, ns)
	if err != nil {
		return err
	}
	defer unlock()
	p.sweep()
	return p.evaluate(ctx, a, ns, ev)
}

// evaluate checks the request against the namespace's quotas and writes
// the new usage; quotas whose write lost a race are read again and
// checked again, the others stay charged.
func (p *Plugin) evaluate(ctx context.Context, a apiserver.AdmissionAttributes, ns string, ev quota.Evaluator) error {
	var pending map[string]bool
	for attempt := 0; ; attempt++ {
		quotas, err := p.list(ctx, ns)
		if err != nil {
			return err
		}
		if pending != nil {
			quotas = only(quotas, pending)
		}
		if len(quotas) == 0 {
			return nil
		}
		changes, err := check(quotas, a, ev)
		if err != nil || a.DryRun || len(changes) == 0 {
			return err
		}
		pending = map[string]bool{}
		var lastErr error
		for _, c := range changes {
			stored, err := p.Quotas.UpdateStatus(ctx, c.updated, c.old.ResourceVersion)
			if err != nil {
				pending[c.old.Name], lastErr = true, err
				continue
			}
			p.wrote(stored)
			p.hold(a.Object, ns, c.old.Name, c.delta)
		}
		if lastErr == nil {
			return nil
		}
		if !apierrors.IsConflict(lastErr) || attempt >= conflictRetries {
			return asAPIError(lastErr)
		}
		p.noteForeign(ns, pending)
	}
}

// list reads the quotas, preferring the copy this plugin last wrote when
// the source has not caught up with it; a newer stored copy means someone
// else wrote.
func (p *Plugin) list(ctx context.Context, ns string) ([]*corev1.ResourceQuota, error) {
	items, err := p.Quotas.List(ctx, ns)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("error resolving quota: %w", err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.ResourceQuota, 0, len(items))
	for _, q := range items {
		key := q.Namespace + "/" + q.Name
		if mine := p.latest[key]; mine != nil && mine.UID == q.UID {
			switch c := compareRV(q.ResourceVersion, mine.ResourceVersion); {
			case c < 0:
				q = mine
			case c > 0:
				p.foreign[key]++
				delete(p.latest, key)
			}
		}
		out = append(out, q.DeepCopy())
	}
	return out, nil
}

func (p *Plugin) wrote(q *corev1.ResourceQuota) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest[q.Namespace+"/"+q.Name] = q.DeepCopy()
}

// noteForeign: a lost race means another writer changed these quotas.
func (p *Plugin) noteForeign(ns string, names map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := range names {
		p.foreign[ns+"/"+n]++
		delete(p.latest, ns+"/"+n)
	}
}

func only(quotas []*corev1.ResourceQuota, names map[string]bool) []*corev1.ResourceQuota {
	var out []*corev1.ResourceQuota
	for _, q := range quotas {
		if names[q.Name] {
			out = append(out, q)
		}
	}
	return out
}

// compareRV orders resourceVersions, which are store revisions; one that
// is not a number compares as newer, so it is never shadowed.
func compareRV(a, b string) int {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		if a == b {
			return 0
		}
		return 1
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func asAPIError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(err)
}

// nsLock serializes the quota checks of one namespace, as upstream's
// evaluator does with one worker per namespace, so this server's own
// writes never race each other.
type nsLock struct {
	ch   chan struct{}
	refs int
}

func (p *Plugin) lock(ctx context.Context, ns string) (func(), error) {
	p.mu.Lock()
	p.init()
	l := p.locks[ns]
	if l == nil {
		l = &nsLock{ch: make(chan struct{}, 1)}
		p.locks[ns] = l
	}
	l.refs++
	p.mu.Unlock()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; p.unref(ns, l) }, nil
	case <-ctx.Done():
		p.unref(ns, l)
		return nil, fmt.Errorf("resource quota evaluation: %w", ctx.Err())
	case <-timer.C:
		p.unref(ns, l)
		return nil, apierrors.NewInternalError(errors.New("resource quota evaluation timed out"))
	}
}

func (p *Plugin) unref(ns string, l *nsLock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(p.locks, ns)
	}
}

// ValidatingPhase: quota is charged only for valid objects, last.
func (*Plugin) ValidatingPhase() {}
