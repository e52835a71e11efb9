// Package eventttl expires Events. Upstream stores Events in etcd with a
// one-hour lease, so they vanish by themselves; our store has no TTL, so
// this controller sweeps instead: every Period it pages through the
// Events and deletes those last seen more than TTL ago. core/v1 and
// events.k8s.io/v1 serve the same stored Events (as upstream), so one
// sweep through core/v1 covers both.
//
// It keeps no informer: a cluster with an event storm may hold far more
// Events than any controller wants in memory, and each sweep holds only
// one page of them.
package eventttl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

const (
	// DefaultTTL is upstream's --event-ttl.
	DefaultTTL = time.Hour
	// DefaultPeriod is the time between sweeps: Events outlive their TTL
	// by at most this much.
	DefaultPeriod = time.Minute
	// DefaultPageSize is how many Events one list call returns.
	DefaultPageSize = 500
)

// Config wires the sweeper. It records no Events of its own (they would
// be about Events) and so takes no recorder; it needs list and delete on
// core/v1 events.
type Config struct {
	Client kubernetes.Interface
	Logger *slog.Logger
	// TTL is how long after it was last seen an Event is deleted
	// (default 1h).
	TTL time.Duration
	// Period is the time between sweeps (default 1m).
	Period time.Duration
	// PageSize is the list page size (default 500).
	PageSize int64
}

// Run sweeps every Period until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil {
		return errors.New("eventttl: Client is required")
	}
	s := newSweeper(cfg)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		n, err := s.sweep(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			s.log.Warn("event ttl sweep", "deleted", n, "err", err)
			return
		}
		if n > 0 {
			s.log.Info("deleted expired events", "count", n, "ttl", s.ttl)
		}
	}, orDefault(cfg.Period, DefaultPeriod))
	return nil
}

type sweeper struct {
	client kubernetes.Interface
	log    *slog.Logger
	ttl    time.Duration
	page   int64
}

func newSweeper(cfg Config) *sweeper {
	s := &sweeper{client: cfg.Client, log: cfg.Logger, ttl: orDefault(cfg.TTL, DefaultTTL), page: cfg.PageSize}
	if s.page <= 0 {
		s.page = DefaultPageSize
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// sweep deletes the Events last seen before now-TTL and returns how many
// it deleted.
func (s *sweeper) sweep(ctx context.Context, now time.Time) (int, error) {
	return s.sweepCore(ctx, now.Add(-s.ttl))
}

// expired is one Event to delete; the preconditions make the delete fail
// (harmlessly) if the Event was updated since it was listed: a repeat of
// it was seen, which would have renewed its lease upstream.
type expired struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
}

func (s *sweeper) sweepCore(ctx context.Context, cutoff time.Time) (int, error) {
	api := s.client.CoreV1().Events(metav1.NamespaceAll)
	return s.pages(ctx, "core/v1", func(ctx context.Context, opts metav1.ListOptions) ([]expired, string, error) {
		l, err := api.List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		var out []expired
		for i := range l.Items {
			e := &l.Items[i]
			if lastSeenCore(e).Before(cutoff) {
				out = append(out, expired{e.Namespace, e.Name, e.UID, e.ResourceVersion})
			}
		}
		return out, l.Continue, nil
	}, func(ctx context.Context, e expired, opts metav1.DeleteOptions) error {
		return s.client.CoreV1().Events(e.namespace).Delete(ctx, e.name, opts)
	})
}

type listFunc func(context.Context, metav1.ListOptions) ([]expired, string, error)
type deleteFunc func(context.Context, expired, metav1.DeleteOptions) error

// pages lists one page at a time and deletes its expired Events before
// asking for the next.
func (s *sweeper) pages(ctx context.Context, group string, list listFunc, del deleteFunc) (int, error) {
	deleted := 0
	opts := metav1.ListOptions{Limit: s.page}
	for {
		batch, cont, err := list(ctx, opts)
		if err != nil {
			return deleted, fmt.Errorf("list %s events: %w", group, err)
		}
		for _, e := range batch {
			err := del(ctx, e, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &e.uid, ResourceVersion: &e.resourceVersion}})
			switch {
			case err == nil:
				deleted++
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			default:
				return deleted, fmt.Errorf("delete %s event %s/%s: %w", group, e.namespace, e.name, err)
			}
		}
		if cont == "" {
			return deleted, nil
		}
		opts.Continue = cont
	}
}

// lastSeenCore is when a core/v1 Event last happened: the latest of the
// times its writers set, or its creation when they set none.
func lastSeenCore(e *corev1.Event) time.Time {
	var t time.Time
	if e.Series != nil {
		t = later(t, e.Series.LastObservedTime.Time)
	}
	t = later(t, e.LastTimestamp.Time)
	t = later(t, e.EventTime.Time)
	if t.IsZero() {
		t = later(t, e.FirstTimestamp.Time)
	}
	if t.IsZero() {
		return e.CreationTimestamp.Time
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
