package etcdtest

import (
	"context"
	"testing"
	"time"
)

func TestStart_ThreeMembersTLS_LeaderKilledAndRestarted_ClusterServes(t *testing.T) {
	c := Start(t, Options{Members: 3, TLS: true})
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("%d endpoints, want 3", got)
	}
	for _, f := range []string{c.CAFile(), c.CertFile(), c.KeyFile()} {
		if f == "" {
			t.Fatal("TLS cluster without client files")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := c.Leader(ctx)
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.Kill(leader)
	if c.Running(leader) {
		t.Fatal("killed member still running")
	}
	next := c.Leader(ctx)
	if next < 0 || next == leader {
		t.Fatalf("leader after killing member %d: %d", leader, next)
	}
	c.Restart(leader)
	if err := c.waitHealthy(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

func TestStart_OneMemberPlain_ServesAndStops(t *testing.T) {
	c := Start(t, Options{})
	if c.Members() != 1 || c.CAFile() != "" {
		t.Fatalf("members %d, CA %q", c.Members(), c.CAFile())
	}
	c.Stop(0)
	if c.Running(0) {
		t.Fatal("stopped member still running")
	}
	c.Restart(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
