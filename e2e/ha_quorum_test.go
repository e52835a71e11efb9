package e2e

// Quorum arithmetic on real servers (the seed's Problem 1): five servers
// tolerate two failures and refuse writes after a third; four servers split
// 2/2 have no majority on either side, which is why a fourth server buys no
// extra tolerance over three.

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// skiffIn runs a short skiff command inside n's namespace.
func (c *haCluster) skiffIn(n *netNode, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + n.NS, "--", skiffBin}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("skiff %s in %s: %w: %s", strings.Join(args, " "), n.Name, err, out)
	}
	return string(out), nil
}

// split cuts every link between the two groups (blackhole routes inside
// the groups' own namespaces: a packet to the other side vanishes), or
// heals it. Each group still reaches itself and the test host.
func (c *haCluster) split(a, b []*netNode, cut bool) {
	c.t.Helper()
	verb := "add"
	if !cut {
		verb = "del"
	}
	for _, pair := range [][2][]*netNode{{a, b}, {b, a}} {
		for _, from := range pair[0] {
			for _, to := range pair[1] {
				c.lab.ip(from.NS, "route", verb, "blackhole", to.IP.String()+"/32")
			}
		}
	}
}

func TestHA_FiveServersSurviveTwoFailures_FourSplitTwoTwoRefuseWrites(t *testing.T) {
	c := newHACluster(t, 5, 0)
	s := c.servers

	t.Run("FiveServersLoseTwo", func(t *testing.T) {
		leader := c.leader(s[0], 10*time.Second)
		others := c.others(leader)
		// The leader and one more go: three of five are a majority.
		down := []*netNode{leader, others[0]}
		live := others[1:]
		for _, n := range down {
			n.Kill()
		}
		c.server = live[0]
		took := c.writeUntilOK(live[0], "five-minus-two", 30*time.Second)
		t.Logf("FIGURE five servers, leader and one more killed: first acknowledged write after %v", took.Round(time.Millisecond))
		for _, n := range live[1:] {
			c.writeUntilOK(n, "five-minus-two-via-"+n.Name, 10*time.Second)
		}
		// A third failure leaves two of five: no majority.
		live[2].Kill()
		down = append(down, live[2])
		live = live[:2]
		for _, n := range live {
			took := c.refusesWrites(n, "five-minus-three-via-"+n.Name, 30*time.Second)
			t.Logf("FIGURE five servers, three down: a write through %s failed with 503 after %v", n.Name, took.Round(time.Millisecond))
		}
		for _, n := range down {
			n.Start()
		}
		for _, n := range s {
			c.waitReadyz(n, 90*time.Second)
		}
		c.writeUntilOK(s[0], "five-again", 30*time.Second)
		c.sameLists(s...)
		for _, n := range s {
			c.checkAcked(n)
		}
	})

	t.Run("FourServersSplitTwoTwo", func(t *testing.T) {
		// Down to four: the fifth is stopped and removed as a user would.
		gone := s[4]
		gone.Stop()
		if out, err := c.skiffIn(s[0], "server", "members", "remove", gone.Name, "--kubeconfig", haKubeconfig(s[0])); err != nil {
			t.Fatal(err)
		} else if !strings.Contains(out, "removed") {
			t.Fatalf("members remove: %q", out)
		}
		out, err := c.skiffIn(s[1], "server", "members", "list", "--kubeconfig", haKubeconfig(s[1]))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, gone.Name) || strings.Count(out, "server-") != 4 {
			t.Fatalf("members after the removal:\n%s", out)
		}
		four := s[:4]
		c.servers = four
		left, right := four[:2], four[2:]
		c.writeUntilOK(left[0], "four", 10*time.Second)

		c.split(left, right, true)
		for _, n := range four {
			took := c.refusesWrites(n, "split-via-"+n.Name, 30*time.Second)
			t.Logf("FIGURE four servers split 2/2: a write through %s failed with 503 after %v", n.Name, took.Round(time.Millisecond))
		}
		c.split(left, right, false)
		for _, n := range four {
			c.writeUntilOK(n, "healed-via-"+n.Name, 30*time.Second)
		}
		c.sameLists(four...)
		for _, n := range four {
			c.checkAcked(n)
		}
	})
}
