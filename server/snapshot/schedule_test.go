package snapshot

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewSchedule_BadCronSpec_ClearError(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	for _, spec := range []string{"", "every day", "0 */12 * *", "61 * * * *", "0 0 * * * *"} {
		_, err := NewSchedule(Config{Cron: spec, Dir: t.TempDir(), Node: "n", Source: st})
		if err == nil || !strings.Contains(err.Error(), "cron schedule") {
			t.Fatalf("spec %q: %v, want a cron schedule error", spec, err)
		}
	}
	for _, spec := range []string{DefaultCron, "@daily", "*/5 * * * *", "@every 6h"} {
		if _, err := NewSchedule(Config{Cron: spec, Dir: t.TempDir(), Node: "n", Source: st}); err != nil {
			t.Fatalf("spec %q: %v", spec, err)
		}
	}
}

func TestRunSchedule_SavesScheduledSnapshots_PrunesToRetention(t *testing.T) {
	ctx := testContext(t)
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	create(t, st, "/a")
	dir := t.TempDir()
	// Older scheduled snapshots, and an on-demand one retention must keep.
	var old []string
	for i := 1; i <= 3; i++ {
		s, err := Save(ctx, st, dir, ScheduledName, "n", time.Now().Add(-time.Duration(i)*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, s.Name)
	}
	manual, err := Save(ctx, st, dir, OnDemandName, "n", time.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunSchedule(runCtx, Config{Cron: "@every 1s", Retention: 2, Dir: dir, Node: "n", Source: st,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunSchedule: %v", err)
		}
	}()
	// Two schedule times: the newest two scheduled snapshots are the new
	// ones, and the on-demand one stays.
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed, err := List(dir)
		if err != nil {
			t.Fatal(err)
		}
		var scheduled []string
		for _, s := range listed {
			if strings.HasPrefix(s.Name, ScheduledName+"-n-") {
				scheduled = append(scheduled, s.Name)
			}
		}
		fresh := 0
		for _, n := range scheduled {
			if !contains(old, n) {
				fresh++
			}
		}
		if fresh >= 2 && len(scheduled) == 2 && contains(names(listed), manual.Name) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: snapshots %v, want 2 new scheduled ones and %s", names(listed), manual.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
