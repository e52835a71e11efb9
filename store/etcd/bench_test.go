package etcd_test

import (
	"context"
	"fmt"
	"testing"

	"skiff/internal/etcdtest"
	"skiff/store/etcd"
	"skiff/store/storetest"
)

// Run with: go test -run '^$' -bench . ./store/etcd
// A three-member etcd on loopback, as store/raft's BenchmarkCreate runs
// three skiff members: the same operations side by side.
func BenchmarkCreate(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := etcdtest.Start(b, etcdtest.Options{Members: 3})
			s, err := etcd.Open(context.Background(), testConfig(c.Endpoints()))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchCreate(b, s, writers)
		})
	}
}

func BenchmarkGet(b *testing.B) {
	c := etcdtest.Start(b, etcdtest.Options{Members: 3})
	s, err := etcd.Open(context.Background(), testConfig(c.Endpoints()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchGet(b, s)
}
