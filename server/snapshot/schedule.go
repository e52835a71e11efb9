package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultCron is k3s's --etcd-snapshot-schedule-cron: twice a day.
const DefaultCron = "0 */12 * * *"

// Config is the server's snapshot schedule.
type Config struct {
	// Cron is a standard 5-field cron spec or a descriptor (@daily,
	// @every 6h), in the server's local time zone, as k3s's.
	Cron string
	// Retention is how many scheduled snapshots of this node are kept
	// (below 1: all).
	Retention int
	// Dir is the snapshot directory; Node the name snapshots carry.
	Dir, Node string
	// Source is the store snapshotted.
	Source Backuper
	// Logger receives a line per snapshot and the failures.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Schedule takes scheduled snapshots and prunes the old ones.
type Schedule struct {
	cfg   Config
	sched cron.Schedule
}

// NewSchedule checks cfg, so that a bad cron spec fails the server's
// start rather than being found out at the first snapshot time.
func NewSchedule(cfg Config) (*Schedule, error) {
	if cfg.Source == nil {
		return nil, errors.New("snapshot: schedule without a source")
	}
	if err := checkName(cfg.Node); err != nil {
		return nil, fmt.Errorf("snapshot: node name: %w", err)
	}
	if cfg.Dir == "" {
		return nil, errors.New("snapshot: schedule without a directory")
	}
	sched, err := cron.ParseStandard(cfg.Cron)
	if err != nil {
		return nil, fmt.Errorf("snapshot: cron schedule %q (want 5 fields: minute hour day-of-month month day-of-week, e.g. %q): %w", cfg.Cron, DefaultCron, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Schedule{cfg: cfg, sched: sched}, nil
}

// RunSchedule is NewSchedule and Run.
func RunSchedule(ctx context.Context, cfg Config) error {
	s, err := NewSchedule(cfg)
	if err != nil {
		return err
	}
	s.Run(ctx)
	return nil
}

// Run takes a snapshot at each schedule time until ctx ends. A failed
// snapshot is logged and the schedule goes on.
func (s *Schedule) Run(ctx context.Context) {
	log := s.cfg.Logger
	next := s.sched.Next(s.cfg.Now())
	log.Info("scheduled snapshots", "cron", s.cfg.Cron, "retention", s.cfg.Retention, "dir", s.cfg.Dir, "next", next.Format(time.RFC3339))
	for {
		t := time.NewTimer(next.Sub(s.cfg.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.take(ctx)
		next = s.sched.Next(s.cfg.Now())
	}
}

// take saves one scheduled snapshot and prunes past the retention.
func (s *Schedule) take(ctx context.Context) {
	log := s.cfg.Logger
	start := time.Now()
	info, err := Save(ctx, s.cfg.Source, s.cfg.Dir, ScheduledName, s.cfg.Node, s.cfg.Now())
	if err != nil {
		if ctx.Err() == nil {
			log.Error("scheduled snapshot failed", "err", err)
		}
		return
	}
	log.Info("saved scheduled snapshot", "name", info.Name, "revision", info.Revision, "size", info.Size, "took", time.Since(start).Round(time.Millisecond))
	if err := Prune(s.cfg.Dir, ScheduledName+"-"+s.cfg.Node, s.cfg.Retention); err != nil {
		log.Error("pruning scheduled snapshots failed", "err", err)
	}
}
