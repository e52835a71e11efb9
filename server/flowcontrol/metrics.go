package flowcontrol

import "github.com/prometheus/client_golang/prometheus"

// metrics are upstream's apiserver_flowcontrol_* series that tools (and the
// e2e tests, for the nominal limit) read.
type metrics struct {
	nominal    *prometheus.GaugeVec
	executing  *prometheus.GaugeVec
	inQueue    *prometheus.GaugeVec
	rejected   *prometheus.CounterVec
	dispatched *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		nominal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_nominal_limit_seats",
			Help: "Nominal number of execution seats configured for each priority level",
		}, []string{"priority_level"}),
		executing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_executing_requests",
			Help: "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
		}, []string{"priority_level"}),
		inQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_inqueue_requests",
			Help: "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
		}, []string{"priority_level"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_rejected_requests_total",
			Help: "Number of requests rejected by API Priority and Fairness subsystem",
		}, []string{"flow_schema", "priority_level", "reason"}),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_dispatched_requests_total",
			Help: "Number of requests executed by API Priority and Fairness subsystem",
		}, []string{"flow_schema", "priority_level"}),
	}
	if reg != nil {
		reg.MustRegister(m.nominal, m.executing, m.inQueue, m.rejected, m.dispatched)
	}
	return m
}

// levelGauges are one level's executing and waiting gauges.
type levelGauges struct {
	executing, inQueue prometheus.Gauge
}

func (m *metrics) forLevel(name string) levelGauges {
	return levelGauges{executing: m.executing.WithLabelValues(name), inQueue: m.inQueue.WithLabelValues(name)}
}

func (g levelGauges) set(executing, waiting int) {
	g.executing.Set(float64(executing))
	g.inQueue.Set(float64(waiting))
}

// forget drops the series of a level that is gone.
func (m *metrics) forget(name string) {
	m.nominal.DeleteLabelValues(name)
	m.executing.DeleteLabelValues(name)
	m.inQueue.DeleteLabelValues(name)
}
