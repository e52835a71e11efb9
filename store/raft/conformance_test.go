package raft_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"skiff/store"
	"skiff/store/raft"
	"skiff/store/raft/rafttest"
	"skiff/store/storetest"
)

// crashMemberEnv tells the crash test's child process which member the
// storm writes through (the parent sets it for the subtest).
const crashMemberEnv = "SKIFF_RAFT_CONFORMANCE_MEMBER"

// conformanceOptions make elections quicker than the defaults: the suite
// starts a cluster per test.
var conformanceOptions = rafttest.Options{Config: func(i int, cfg *raft.Config) {
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 150 * time.Millisecond
	cfg.ApplyTimeout = 10 * time.Second
}}

// openThrough opens (or reopens) a three-member cluster in dir and returns
// member m; closing it closes the cluster.
func openThrough(m int) storetest.OpenFunc {
	return func(ctx context.Context, dir string) (store.Store, error) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		c, err := rafttest.Start(ctx, dir, 3, conformanceOptions)
		if err != nil {
			return nil, err
		}
		return c.AsStore(m), nil
	}
}

func TestMain(m *testing.M) {
	member, _ := strconv.Atoi(os.Getenv(crashMemberEnv))
	storetest.CrashChildMain(openThrough(member))
	os.Exit(m.Run())
}

// TestConformance runs the store suite through each member of a
// three-member cluster: through the leader (member0 bootstraps, so it
// usually leads) and through followers, whose writes are forwarded and
// whose reads use the leader's read index.
func TestConformance(t *testing.T) {
	for m := range 3 {
		t.Run(fmt.Sprintf("member%d", m), func(t *testing.T) {
			t.Setenv(crashMemberEnv, strconv.Itoa(m))
			storetest.Run(t, openThrough(m))
		})
	}
}
