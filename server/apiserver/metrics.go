package apiserver

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the API server's Prometheus metrics, named as upstream's so
// existing dashboards and alerts read them.
type Metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	watchers  *prometheus.GaugeVec
	inflight  *prometheus.GaugeVec
	bodyBytes *prometheus.HistogramVec
}

// NewMetrics registers the API server's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, group, version, resource, subresource, scope and component (watches excluded).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_registered_watchers",
			Help: "Number of currently registered watchers for a given resource.",
		}, []string{"group", "version", "kind"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "Number of requests being served, by kind (mutating or readOnly).",
		}, []string{"request_kind"}),
		bodyBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_body_size_bytes",
			Help:    "Apiserver request body size in bytes broken out by resource and verb.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 8),
		}, []string{"resource", "verb"}),
	}
	reg.MustRegister(m.requests, m.latency, m.watchers, m.inflight, m.bodyBytes)
	return m
}

// statusRecorder remembers the response code; it passes Flush through so
// watches still stream.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// instrument counts and times every request.
func (s *Server) instrument(next http.Handler) http.Handler {
	m := s.cfg.Metrics
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := parseRequest(r)
		verb := strings.ToUpper(info.Verb)
		scope := "cluster"
		switch {
		case !info.Resource:
			scope = ""
		case info.Namespace != "":
			scope = "namespace"
		case info.Name != "":
			scope = "resource"
		}
		kind := "readOnly"
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			kind = "mutating"
		}
		m.inflight.WithLabelValues(kind).Inc()
		defer m.inflight.WithLabelValues(kind).Dec()
		if r.ContentLength > 0 {
			m.bodyBytes.WithLabelValues(info.Plural, verb).Observe(float64(r.ContentLength))
		}
		if verb == "WATCH" {
			g := m.watchers.WithLabelValues(info.Group, info.Version, info.Plural)
			g.Inc()
			defer g.Dec()
		}
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r)
		if verb != "WATCH" {
			m.latency.WithLabelValues(verb, info.Group, info.Version, info.Plural, info.Subresource, scope, "apiserver").Observe(time.Since(start).Seconds())
		}
		m.requests.WithLabelValues(verb, info.Group, info.Version, info.Plural, info.Subresource, scope, "apiserver", strconv.Itoa(rec.code)).Inc()
	})
}
