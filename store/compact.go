package store

import (
	"context"
	"time"
)

// Compacter is what AutoCompact needs of a store.
type Compacter interface {
	// CurrentRevision is the revision of the last successful write.
	CurrentRevision(ctx context.Context) (int64, error)
	// Compact discards history at and below rev.
	Compact(ctx context.Context, rev int64) error
}

// AutoCompact compacts s every interval until ctx ends. Each tick compacts to
// the revision that was current one tick earlier, so at least one interval of
// history stays readable and watchable — the same policy kube-apiserver applies
// to etcd, which lets a client that lost its watch resume within that window.
// Errors are passed to onErr (which may be nil) and the schedule goes on.
func AutoCompact(ctx context.Context, s Compacter, interval time.Duration, onErr func(error)) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if last > 0 {
			if err := s.Compact(ctx, last); err != nil && onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
		rev, err := s.CurrentRevision(ctx)
		if err != nil {
			if onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
			continue
		}
		last = rev
	}
}
