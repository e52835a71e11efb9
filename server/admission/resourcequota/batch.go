package resourcequota

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// evaluate checks a batch of admission requests, in order, against the
// namespace's quotas, as upstream's checkQuotas does: each admitted
// request's usage is added to a running copy of the quotas, so the next
// one is checked against it, and a refused one adds nothing. Each quota
// the batch changed is then written once. A request is admitted when
// every quota it adds to was written; the quotas whose write lost a race
// are read again and the requests that added to them checked again
// against them only (the quotas that were written stay charged, as they
// would for a single request).
func (p *Plugin) evaluate(ctx context.Context, ns string, batch []*work) {
	open := batch
	var pending map[string]bool
	for attempt := 0; len(open) > 0; attempt++ {
		quotas, err := p.list(ctx, ns)
		if err != nil {
			settle(open, err)
			return
		}
		if pending != nil {
			quotas = only(quotas, pending)
		}
		if len(quotas) == 0 {
			settle(open, nil)
			return
		}
		running, charging := checkBatch(quotas, open)
		failed := p.write(ctx, ns, quotas, running, charging)
		open, pending = p.afterWrite(ns, running, charging, failed, attempt)
	}
}

// checkBatch checks each request against the running quotas and settles
// those that are refused, dry-run or add nothing. It returns the running
// quotas (running[i] is quotas[i] plus what the batch adds) and the
// requests that add to them.
func checkBatch(quotas []*corev1.ResourceQuota, open []*work) ([]*corev1.ResourceQuota, []*work) {
	running := slices.Clone(quotas)
	index := make(map[string]int, len(quotas))
	for i, q := range quotas {
		index[q.Name] = i
	}
	var charging []*work
	for _, w := range open {
		w.charged = nil
		changes, err := check(running, w.a, w.ev)
		if err != nil || w.a.DryRun || len(changes) == 0 {
			w.err = err
			continue
		}
		w.err = nil
		w.charged = make(map[string]corev1.ResourceList, len(changes))
		for _, c := range changes {
			running[index[c.old.Name]] = c.updated
			w.charged[c.old.Name] = c.delta
		}
		charging = append(charging, w)
	}
	return running, charging
}

// write stores each quota the batch changed, once, on the
// resourceVersion it was read at, and holds what each request added to a
// written quota for Release. It returns the errors of the quotas not
// written, by name.
func (p *Plugin) write(ctx context.Context, ns string, quotas, running []*corev1.ResourceQuota, charging []*work) map[string]error {
	failed := map[string]error{}
	for i, q := range running {
		if q == quotas[i] {
			continue
		}
		stored, err := p.Quotas.UpdateStatus(ctx, q, quotas[i].ResourceVersion)
		if err != nil {
			failed[q.Name] = err
			continue
		}
		p.wrote(stored)
		for _, w := range charging {
			if delta, ok := w.charged[q.Name]; ok {
				p.hold(w.a.Object, ns, q.Name, delta)
			}
		}
	}
	return failed
}

// afterWrite settles the requests whose quotas were all written
// (admitted) or one of whose writes failed for good (that error), and
// returns the requests to check again with the names of the quotas that
// lost a race, while retries are left.
func (p *Plugin) afterWrite(ns string, running []*corev1.ResourceQuota, charging []*work, failed map[string]error, attempt int) ([]*work, map[string]bool) {
	conflicted, pending := map[string]bool{}, map[string]bool{}
	for name, err := range failed {
		if apierrors.IsConflict(err) {
			conflicted[name] = true
			if attempt < conflictRetries {
				pending[name] = true
			}
		}
	}
	if len(conflicted) > 0 {
		p.noteForeign(ns, conflicted)
	}
	var retry []*work
	for _, w := range charging {
		again := false
		for _, q := range running {
			if _, ok := w.charged[q.Name]; !ok {
				continue
			}
			switch err, ok := failed[q.Name]; {
			case !ok:
			case pending[q.Name]:
				again = true
			case w.err == nil:
				w.err = asAPIError(err)
			}
		}
		if again && w.err == nil {
			retry = append(retry, w)
		}
	}
	return retry, pending
}

func settle(ws []*work, err error) {
	for _, w := range ws {
		w.err = err
	}
}
