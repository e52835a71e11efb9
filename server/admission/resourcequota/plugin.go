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
	// this plugin take turns per namespace (queue.go) and do not race.
	conflictRetries = 5
	// waitLimit is how long a write waits in its namespace's queue, as
	// upstream's evaluator waits, and bounds the batch that carries it.
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

	// wait replaces waitLimit when set (tests).
	wait time.Duration

	mu     sync.Mutex
	queues map[string]*nsQueue
	// latest is the newest copy of each quota this plugin wrote, and
	// foreign counts writes by others it noticed (see release.go).
	latest  map[string]*corev1.ResourceQuota
	foreign map[string]int
	held    map[runtime.Object]*charge
}

var _ apiserver.Admitter = (*Plugin)(nil)
var _ apiserver.Releaser = (*Plugin)(nil)

func (p *Plugin) init() {
	if p.queues == nil {
		p.queues = map[string]*nsQueue{}
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
	return p.run(ctx, ns, newWork(a, ev, nil))
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

// ValidatingPhase: quota is charged only for valid objects, last.
func (*Plugin) ValidatingPhase() {}
