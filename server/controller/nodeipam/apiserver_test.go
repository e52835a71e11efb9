package nodeipam

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/controllertest"
)

// cluster is a real API server with the "default" namespace (where the
// events about nodes go) and a recorder writing to it.
type cluster struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	client := controllertest.Start(t, controllertest.Options{Namespaces: []string{metav1.NamespaceDefault}}).Client
	return &cluster{client: client, recorder: controllertest.APIRecorder(t, client, "node-ipam-controller")}
}

// start runs the controller with its own informer factory, as after a
// process start; the returned stop waits for everything to end.
func (c *cluster) start(t *testing.T, clusterCIDR string) (stop func()) {
	t.Helper()
	_, rng, err := net.ParseCIDR(clusterCIDR)
	if err != nil {
		t.Fatal(err)
	}
	factory := controllertest.Informers(t, c.client)
	stopRun := controllertest.Run(t, context.Background(), func(ctx context.Context) error {
		return Run(ctx, Config{Client: c.client, Informers: factory, Recorder: c.recorder, Logger: controllertest.Logger(t, slog.LevelInfo), ClusterCIDR: rng})
	})
	return func() {
		stopRun()
		factory.Shutdown()
	}
}

func (c *cluster) createNode(t *testing.T, name, podCIDR string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	if _, err := c.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) deleteNode(t *testing.T, name string) {
	t.Helper()
	if err := c.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podCIDR waits for the node to have a pod CIDR and returns it.
func (c *cluster) podCIDR(t *testing.T, name string) string {
	t.Helper()
	var got string
	poll(t, "pod CIDR on node "+name, func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if n.Spec.PodCIDR == "" {
			return false, nil
		}
		if len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR {
			t.Fatalf("node %s: podCIDR %q, podCIDRs %v", name, n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
		got = n.Spec.PodCIDR
		return true, nil
	})
	return got
}

// waitEvent waits for an event with the reason about the node.
func (c *cluster) waitEvent(t *testing.T, node, reason string) *corev1.Event {
	t.Helper()
	var got *corev1.Event
	poll(t, reason+" event for node "+node, func(ctx context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
		if err != nil || len(evs.Items) == 0 {
			return false, err
		}
		got = &evs.Items[0]
		return true, nil
	})
	return got
}

func poll(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	controllertest.Eventually(t, context.Background(), 20*time.Second, cond, "%s", what)
}

func TestNodeIPAM_NodesGetDistinctCIDRs_ExistingKept(t *testing.T) {
	c := newCluster(t)
	c.createNode(t, "pre", "10.42.1.0/24")
	c.createNode(t, "elsewhere", "192.168.0.0/24") // outside the range: kept, not tracked
	c.start(t, "10.42.0.0/16")
	seen := map[string]string{"10.42.1.0/24": "pre"}
	for _, n := range []string{"a", "b", "c", "d"} {
		c.createNode(t, n, "")
		got := c.podCIDR(t, n)
		if other, dup := seen[got]; dup {
			t.Fatalf("node %s got %s, already %s's", n, got, other)
		}
		if !strings.HasPrefix(got, "10.42.") || !strings.HasSuffix(got, ".0/24") {
			t.Fatalf("node %s got %s, want a /24 of 10.42.0.0/16", n, got)
		}
		seen[got] = n
	}
	for node, want := range map[string]string{"pre": "10.42.1.0/24", "elsewhere": "192.168.0.0/24"} {
		if got := c.podCIDR(t, node); got != want {
			t.Errorf("node %s pod CIDR changed to %s, want %s kept", node, got, want)
		}
	}
	ev := c.waitEvent(t, "a", ReasonCIDRAssigned)
	if ev.Type != corev1.EventTypeNormal || ev.InvolvedObject.Kind != "Node" {
		t.Errorf("CIDRAssigned event = %s about %s", ev.Type, ev.InvolvedObject.Kind)
	}
}

func TestNodeIPAM_RangeExhausted_EventThenFreedCIDRReused(t *testing.T) {
	c := newCluster(t)
	c.start(t, "10.42.0.0/23") // two /24s
	c.createNode(t, "a", "")
	c.createNode(t, "b", "")
	freed := c.podCIDR(t, "a")
	c.podCIDR(t, "b")
	c.createNode(t, "late", "")
	ev := c.waitEvent(t, "late", ReasonCIDRNotAvailable)
	if ev.Message != "Node late status is now: CIDRNotAvailable" {
		t.Errorf("event message %q", ev.Message)
	}
	c.deleteNode(t, "a")
	if got := c.podCIDR(t, "late"); got != freed {
		t.Fatalf("late got %s, want %s freed by a's deletion", got, freed)
	}
}

func TestNodeIPAM_Restart_KeepsAssignmentsAndNeverShares(t *testing.T) {
	c := newCluster(t)
	stop := c.start(t, "10.42.0.0/22") // four /24s
	before := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		c.createNode(t, n, "")
		before[n] = c.podCIDR(t, n)
	}
	stop()
	// While the controller is down: a node goes, two come.
	c.deleteNode(t, "b")
	c.createNode(t, "d", "")
	c.createNode(t, "e", "")
	c.start(t, "10.42.0.0/22")
	got := map[string]string{"d": c.podCIDR(t, "d"), "e": c.podCIDR(t, "e")}
	for _, n := range []string{"a", "c"} {
		if cur := c.podCIDR(t, n); cur != before[n] {
			t.Errorf("node %s: pod CIDR %s after restart, was %s", n, cur, before[n])
		}
		got[n] = before[n]
	}
	owners := map[string]string{}
	for n, cidr := range got {
		if o, dup := owners[cidr]; dup {
			t.Fatalf("nodes %s and %s share %s", n, o, cidr)
		}
		owners[cidr] = n
	}
	if owners[before["b"]] == "" {
		t.Errorf("b's %s, freed while the controller was down, was not reused: %v", before["b"], got)
	}
}

func TestNodeIPAM_DualStack_NodeGetsBothFamilies(t *testing.T) {
	c := newCluster(t)
	_, v4, _ := net.ParseCIDR("10.42.0.0/16")
	_, v6, _ := net.ParseCIDR("fd00:42::/56")
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c.client, 0)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: c.client, Informers: factory, Recorder: c.recorder, ClusterCIDR: v4, ClusterCIDRIPv6: v6})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		factory.Shutdown()
	}()
	c.createNode(t, "a", "")
	poll(t, "pod CIDRs of both families", func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
		if err != nil || len(n.Spec.PodCIDRs) == 0 {
			return false, err
		}
		if n.Spec.PodCIDR != "10.42.0.0/24" || len(n.Spec.PodCIDRs) != 2 || n.Spec.PodCIDRs[0] != "10.42.0.0/24" || n.Spec.PodCIDRs[1] != "fd00:42::/64" {
			t.Fatalf("podCIDR %q, podCIDRs %v", n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
		return true, nil
	})
}

func TestConfig_Ranges(t *testing.T) {
	parse := func(s string) *net.IPNet {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		sets int // 0: refused
	}{
		{"defaults", Config{}, 1},
		{"dual-stack", Config{ClusterCIDRIPv6: parse("fd00::/48")}, 2},
		{"IPv6 as the IPv4 range", Config{ClusterCIDR: parse("fd00::/48")}, 0},
		{"IPv4 as the IPv6 range", Config{ClusterCIDRIPv6: parse("10.0.0.0/16")}, 0},
		{"node mask wider than the range", Config{ClusterCIDR: parse("10.42.0.0/24"), NodeCIDRMaskSize: 16}, 0},
		{"IPv6 node mask too small for the range", Config{ClusterCIDRIPv6: parse("fd00::/32")}, 0},
	} {
		sets, err := tc.cfg.sets()
		if len(sets) != tc.sets || (err == nil) != (tc.sets > 0) {
			t.Errorf("%s: %d ranges, err %v; want %d", tc.name, len(sets), err, tc.sets)
		}
	}
	if s, _ := (&Config{}).sets(); s[0].cluster.String() != DefaultClusterCIDR || s[0].maskSize != 24 {
		t.Errorf("default range %v /%d", s[0].cluster, s[0].maskSize)
	}
}
