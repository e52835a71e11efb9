package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"skiff/store/storetest"
)

// Run with: go test -run '^$' -bench . ./store/sqlite
// (make bench runs these and the kine comparison in store/sqlite/kinebench).

func benchStore(b *testing.B) *Store {
	s, err := Open(context.Background(), Config{Path: filepath.Join(b.TempDir(), "state.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkCreate(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			storetest.BenchCreate(b, benchStore(b), writers)
		})
	}
}

func BenchmarkGet(b *testing.B) { storetest.BenchGet(b, benchStore(b)) }

func BenchmarkList10000(b *testing.B) { storetest.BenchList(b, benchStore(b), 10000) }

func BenchmarkWatchLatency(b *testing.B) { storetest.BenchWatchLatency(b, benchStore(b)) }
