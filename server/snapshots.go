package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"skiff/server/snapshot"
)

// SnapshotConfig is the server's scheduled snapshots of its state store
// (k3s's --etcd-snapshot-* flags).
type SnapshotConfig struct {
	// Cron is the schedule (default snapshot.DefaultCron, twice a day).
	Cron string
	// Retention is how many scheduled snapshots are kept (5).
	Retention int
	// Disable turns the schedule off; `skiff snapshot save` still works.
	Disable bool
	// Dir is where they go ("" = snapshot.Dir(DataDir)).
	Dir string
	// Node names the snapshots ("" = the host name).
	Node string
}

// startSnapshots starts the snapshot schedule on the opened store, in a
// goroutine that stop cancels and awaits: the caller stops it before the
// store closes. A store without a local copy to take (an external etcd)
// has no schedule. A bad cron spec fails here, at start.
func startSnapshots(ctx context.Context, cfg Config, st any, log *slog.Logger) (stop func(), err error) {
	o := cfg.Snapshots
	if o.Disable {
		log.Info("scheduled snapshots disabled (--disable-snapshots)")
		return func() {}, nil
	}
	src, ok := st.(snapshot.Backuper)
	if !ok {
		log.Info("scheduled snapshots off: the datastore is external; back it up with its own tools")
		return func() {}, nil
	}
	if o.Cron == "" {
		o.Cron = snapshot.DefaultCron
	}
	if o.Dir == "" {
		o.Dir = snapshot.Dir(cfg.DataDir)
	}
	if o.Node == "" {
		if o.Node, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("snapshots: node name: %w", err)
		}
	}
	sched, err := snapshot.NewSchedule(snapshot.Config{Cron: o.Cron, Retention: o.Retention, Dir: o.Dir, Node: o.Node,
		Source: src, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--snapshot-schedule-cron: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

// lockDataDir takes the data directory's lock for the server's lifetime: a
// second server, or a `skiff snapshot restore`, on it fails clearly.
func lockDataDir(dataDir string) (*snapshot.Lock, error) {
	l, err := snapshot.LockDataDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return l, nil
}
