package server

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"

	"skiff/server/componentstatus"
	"skiff/server/registry"
	"skiff/store"
)

// serveComponentStatuses makes core/v1 componentstatuses computed from the
// control loops' Leases and the store.
func serveComponentStatuses(reg *registry.Registry, st store.Store, lookups *objectLookups) {
	res, ok := reg.Lookup("", "v1", "componentstatuses")
	if !ok {
		return
	}
	res.Compute = componentstatus.Config{Store: st, Leases: leaseLookups{lookups},
		SchedulerLease: schedulerLease, ControllerManagerLease: controllerManagerLease}.Statuses
}

type leaseLookups struct{ l *objectLookups }

func (x leaseLookups) Lease(_ context.Context, namespace, name string) *coordinationv1.Lease {
	return get[coordinationv1.Lease](x.l, "coordination.k8s.io", "leases", namespace, name)
}
