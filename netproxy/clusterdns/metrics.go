package clusterdns

import (
	"fmt"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	zoneCluster = "cluster"
	zoneForward = "forward"
)

type metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	forwardErrors prometheus.Counter
}

// newMetrics creates the DNS metrics and registers them on reg (nil: they
// are counted and never exported).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skiff_dns_requests_total",
			Help: "DNS requests answered, by zone (cluster or forward) and response code.",
		}, []string{"zone", "rcode"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skiff_dns_request_duration_seconds",
			Help: "Time from a request's arrival to its answer being written, by zone.",
			// 50 µs (a cluster answer) to 5 s (an upstream timing out).
			Buckets: prometheus.ExponentialBucketsRange(50e-6, 5, 18),
		}, []string{"zone"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skiff_dns_cache_hits_total",
			Help: "Forwarded questions answered from the cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skiff_dns_cache_misses_total",
			Help: "Forwarded questions not in the cache.",
		}),
		forwardErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skiff_dns_forward_errors_total",
			Help: "Exchanges with an upstream resolver that failed (timeout, network error, refusal).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.cacheHits, m.cacheMisses, m.forwardErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register dns metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(zone string, rcode int, d time.Duration) {
	m.requests.WithLabelValues(zone, rcodeName(rcode)).Inc()
	m.duration.WithLabelValues(zone).Observe(d.Seconds())
}

func rcodeName(rcode int) string {
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return fmt.Sprint(rcode)
}
