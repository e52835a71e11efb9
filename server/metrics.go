package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"skiff/store"
)

// timedStore records how long each state-store operation takes, as
// upstream's etcd_request_duration_seconds does for etcd.
type timedStore struct {
	store.Store
	h *prometheus.HistogramVec
}

func newTimedStore(st store.Store, reg prometheus.Registerer) *timedStore {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "skiff_store_request_duration_seconds",
		Help:    "State store request latency in seconds, by operation.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5},
	}, []string{"operation"})
	reg.MustRegister(h)
	return &timedStore{Store: st, h: h}
}

func (t *timedStore) observe(op string, start time.Time) {
	t.h.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

func (t *timedStore) Get(ctx context.Context, key string) (store.KeyValue, error) {
	defer t.observe("get", time.Now())
	return t.Store.Get(ctx, key)
}

func (t *timedStore) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	defer t.observe("list", time.Now())
	return t.Store.List(ctx, opts)
}

func (t *timedStore) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	defer t.observe("create", time.Now())
	return t.Store.Create(ctx, key, value)
}

func (t *timedStore) Update(ctx context.Context, key string, value []byte, rev int64) (store.KeyValue, error) {
	defer t.observe("update", time.Now())
	return t.Store.Update(ctx, key, value, rev)
}

func (t *timedStore) Delete(ctx context.Context, key string, rev int64) (store.KeyValue, int64, error) {
	defer t.observe("delete", time.Now())
	return t.Store.Delete(ctx, key, rev)
}
