package raft_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"skiff/store/raft/rafttest"
	"skiff/store/storetest"
)

// Run with: go test -run '^$' -bench . ./store/raft
// Three members on loopback (through rafttest's proxies), each fsyncing
// its raft log and its replica.
func BenchmarkCreate(b *testing.B) {
	for _, via := range []string{"leader", "follower"} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("via=%s/writers=%d", via, writers), func(b *testing.B) {
				c := rafttest.NewCluster(b, 3)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				m, err := c.WaitLeader(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if via == "follower" {
					m = (m + 1) % 3
				}
				storetest.BenchCreate(b, c.Members[m], writers)
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	for _, via := range []string{"leader", "follower"} {
		b.Run("via="+via, func(b *testing.B) {
			c := rafttest.NewCluster(b, 3)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			m, err := c.WaitLeader(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if via == "follower" {
				m = (m + 1) % 3
			}
			storetest.BenchGet(b, c.Members[m])
		})
	}
}
