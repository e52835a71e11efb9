package kinebench

import (
	"os"
	"strconv"
	"strings"
	"testing"

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

// openBench opens a fresh kine store in b.TempDir(), closed when b ends.
func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := OpenWith(Options{Dir: b.TempDir(), Params: benchParams()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
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
