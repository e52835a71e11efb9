package netproxy

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus collectors. They exist (unregistered)
// even without a Registerer so the sync code never checks.
type metrics struct {
	syncDuration       *prometheus.HistogramVec
	syncErrors         prometheus.Counter
	lastSync           prometheus.Gauge
	services           prometheus.Gauge
	objects            *prometheus.GaugeVec
	conntrackDeletions prometheus.Counter
	resyncSkipped      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skiff_proxy_sync_duration_seconds",
			Help:    "Time to build and apply one nftables sync, full or partial (changed services only).",
			Buckets: prometheus.ExponentialBucketsRange(100e-6, 10, 16),
		}, []string{"kind"}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skiff_proxy_sync_errors_total",
			Help: "Syncs whose batch the kernel refused or that could not be built.",
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "skiff_proxy_last_sync_timestamp_seconds",
			Help: "Unix time of the last successful sync, or of the last periodic check that found the ruleset as written.",
		}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "skiff_proxy_services",
			Help: "Service ports with rules installed.",
		}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "skiff_proxy_nft_objects",
			Help: "nftables chains, rules and map elements installed by the proxy.",
		}, []string{"kind"}),
		conntrackDeletions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skiff_proxy_conntrack_deletions_total",
			Help: "Stale UDP conntrack entries deleted.",
		}),
		resyncSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skiff_proxy_resync_skipped_total",
			Help: "Periodic resyncs skipped because the nftables ruleset generation showed no change since the proxy's last batch.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.syncDuration, m.syncErrors, m.lastSync, m.services, m.objects, m.conntrackDeletions, m.resyncSkipped} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register proxy metrics: %w", err)
	}
	return m, nil
}
