package apiendpoints

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// renew writes this server's record: created if missing, else its
// holder, TTL, renewal time and address brought up to date.
func (r *Reconciler) renew(ctx context.Context, now time.Time) error {
	leases := r.cfg.Client.CoordinationV1().Leases(LeaseNamespace)
	want := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(r.cfg.Identity),
		LeaseDurationSeconds: ptr.To(int32(r.cfg.TTL / time.Second)),
		RenewTime:            &metav1.MicroTime{Time: now},
	}
	return retryWrite(func() error {
		cur, err := leases.Get(ctx, r.leaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: r.leaseName, Namespace: LeaseNamespace,
					Labels:      map[string]string{LabelEndpoint: "true"},
					Annotations: map[string]string{AnnotationAddress: r.self.String()}},
				Spec: want,
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Labels[LabelEndpoint] = "true"
		cur.Annotations[AnnotationAddress] = r.self.String()
		cur.Spec.HolderIdentity, cur.Spec.LeaseDurationSeconds, cur.Spec.RenewTime = want.HolderIdentity, want.LeaseDurationSeconds, want.RenewTime
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// liveServers lists the servers whose records are fresh at now, sorted
// (IPv4 first, numeric address order, then port) and without
// duplicates. withSelf adds this server whatever its record says;
// without it this server's record is ignored (it is leaving). Records of
// other servers expired for more than gcAfter are deleted, best effort.
func (r *Reconciler) liveServers(ctx context.Context, now time.Time, withSelf bool) ([]server, error) {
	leases := r.cfg.Client.CoordinationV1().Leases(LeaseNamespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: LabelEndpoint + "=true"})
	if err != nil {
		return nil, err
	}
	var out []server
	if withSelf {
		out = append(out, r.self)
	}
	for i := range list.Items {
		l := &list.Items[i]
		if l.Name == r.leaseName {
			continue
		}
		s, expiry, err := parseRecord(l)
		if err != nil {
			r.log.Warn("ignoring an API server record", "lease", l.Name, "err", err)
			continue
		}
		switch {
		case now.Before(expiry):
			out = append(out, s)
		case now.Sub(expiry) > gcAfter:
			err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				r.log.Warn("deleting an expired API server record", "lease", l.Name, "err", err)
			}
		}
	}
	slices.SortFunc(out, compareServers)
	return slices.CompactFunc(out, func(a, b server) bool { return a == b }), nil
}

// parseRecord reads a record's address and the time it expires.
func parseRecord(l *coordinationv1.Lease) (server, time.Time, error) {
	ap, err := netip.ParseAddrPort(l.Annotations[AnnotationAddress])
	if err != nil {
		return server{}, time.Time{}, fmt.Errorf("annotation %s: %w", AnnotationAddress, err)
	}
	if ap.Port() == 0 || ap.Addr().IsUnspecified() {
		return server{}, time.Time{}, fmt.Errorf("annotation %s: %q is not a usable address", AnnotationAddress, ap)
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return server{}, time.Time{}, fmt.Errorf("no renewTime or leaseDurationSeconds")
	}
	expiry := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return server{addr: ap.Addr().Unmap(), port: int32(ap.Port())}, expiry, nil
}

// compareServers orders IPv4 before IPv6, then by address, then port.
func compareServers(a, b server) int {
	if a.addr.Is4() != b.addr.Is4() {
		if a.addr.Is4() {
			return -1
		}
		return 1
	}
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	return int(a.port) - int(b.port)
}
