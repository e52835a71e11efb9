package kinebench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"skiff/store/storetest"
)

// The benchmarks run kine with its default SQLite settings. To measure kine
// with skiff's durability setting instead, set KINEBENCH_SYNCHRONOUS=FULL
// (it replaces _synchronous=NORMAL in kine's default DSN).

func TestMain(m *testing.M) {
	// kine logs its start-up steps at info; keep benchmark output readable.
	logrus.SetLevel(logrus.WarnLevel)
	os.Exit(m.Run())
}

func benchParams() string {
	p := DefaultParams
	if v := os.Getenv("KINEBENCH_SYNCHRONOUS"); v != "" {
		p = strings.Replace(p, "_synchronous=NORMAL", "_synchronous="+v, 1)
	}
	return p
}

// openBench opens a fresh kine store in b.TempDir(), closed when b ends, and
// warms its watch path (see warmWatch).
func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := OpenWith(Options{Dir: b.TempDir(), Params: benchParams()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := warmWatch(s); err != nil {
		b.Fatal(err)
	}
	return s
}

// warmWatch writes one key and waits for its watch event. kine's poll loop
// spends its first wake-up after start preparing its statement and then
// waits for the next local write or poll tick, so the first event after
// start takes up to PollInterval (1s). That is a one-time start-up cost, not
// steady state, and is kept out of the figures.
func warmWatch(s *Store) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := s.Watch(ctx, "/kinebench/warmup/", 0)
	if err != nil {
		return err
	}
	defer w.Stop()
	if _, err := s.Create(ctx, "/kinebench/warmup/0", nil); err != nil {
		return err
	}
	select {
	case <-w.Events():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("warm-up watch event: %w", ctx.Err())
	}
}

func BenchmarkKineCreate(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run("writers="+strconv.Itoa(writers), func(b *testing.B) {
			storetest.BenchCreate(b, openBench(b), writers)
		})
	}
}

func BenchmarkKineGet(b *testing.B) {
	storetest.BenchGet(b, openBench(b))
}

func BenchmarkKineList10000(b *testing.B) {
	storetest.BenchList(b, openBench(b), 10000)
}

func BenchmarkKineWatchLatency(b *testing.B) {
	storetest.BenchWatchLatency(b, openBench(b))
}
