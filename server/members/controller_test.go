package members

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"skiff/store/raft"
)

// syncResult is one attempt of the controller: the node and whether it
// failed.
type syncResult struct {
	name   string
	failed bool
}

// barrier is a non-member node deleted once a case's expected attempts
// are seen: an attempt beyond them (a retry that should not be) comes
// before the barrier's, or soon after it.
const barrier = "zz-barrier"

func node(name string) runtime.Object {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// startController runs a NodeController on a fake API holding nodes until
// the test ends, and returns the client once its informer watches, and the
// channel of its attempts.
func startController(t *testing.T, f *fakeCluster, maxAttempts int, nodes ...string) (*fake.Clientset, <-chan syncResult, func() error) {
	t.Helper()
	var objs []runtime.Object
	for _, n := range append(nodes, barrier) {
		objs = append(objs, node(n))
	}
	client := fake.NewClientset(objs...)
	// The fake API does not replay what a watch missed: deletions are
	// made only once the informer's watch is there.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(watching) })
		return true, w, nil
	})
	c := NewNodeController(Config{Client: client, Cluster: f, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c.minDelay, c.maxDelay, c.maxAttempts = time.Millisecond, 5*time.Millisecond, maxAttempts
	syncs := make(chan syncResult, 100)
	c.afterSync = func(name string, err error) { syncs <- syncResult{name, err != nil} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return 10s after its context ended")
			}
		}
		return runErr
	}
	t.Cleanup(func() { stop() })
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller did not watch the nodes within 10s")
	}
	return client, syncs, stop
}

func TestNodeController(t *testing.T) {
	unavailable := errUnavailable
	boom := errors.New("boom")
	tests := []struct {
		name        string
		members     []raft.Member
		membersErrs []error
		removeErrs  []error
		maxAttempts int
		nodes       []string // Nodes besides the members' and the barrier
		deleted     []string
		wantSyncs   []syncResult // before the barrier's
		wantRemoved []string
		wantLeft    []string // member IDs afterwards
	}{
		{
			name: "deleting a server's node removes its member", members: three(), deleted: []string{"b"},
			wantSyncs: []syncResult{{"b", false}}, wantRemoved: []string{"b"}, wantLeft: []string{"a", "c"},
		},
		{
			name: "deleting the leader's node removes its member", members: three(), deleted: []string{"a"},
			wantSyncs: []syncResult{{"a", false}}, wantRemoved: []string{"a"}, wantLeft: []string{"b", "c"},
		},
		{
			name: "deleting an agent's node removes nothing", members: three(), nodes: []string{"worker"}, deleted: []string{"worker"},
			wantSyncs: []syncResult{{"worker", false}}, wantLeft: []string{"a", "b", "c"},
		},
		{
			name: "deleting nodes one after another removes each member", members: three(), nodes: []string{"worker"},
			deleted:   []string{"worker", "c", "b"},
			wantSyncs: []syncResult{{"worker", false}, {"c", false}, {"b", false}}, wantRemoved: []string{"c", "b"}, wantLeft: []string{"a"},
		},
		{
			name: "deleting the only member's node keeps the member", members: three()[:1], deleted: []string{"c"},
			wantSyncs: []syncResult{{"c", false}}, wantLeft: []string{"c"},
		},
		{
			name: "deleting the only voter's node keeps the member", deleted: []string{"a"},
			members:   []raft.Member{{ID: "a", Voter: true}, {ID: "b"}},
			wantSyncs: []syncResult{{"a", false}}, wantLeft: []string{"a", "b"},
		},
		{
			name: "a removal the cluster cannot make now is retried until it succeeds", members: three(), deleted: []string{"b"},
			removeErrs: []error{unavailable, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable}, maxAttempts: 2,
			wantSyncs:   []syncResult{{"b", true}, {"b", true}, {"b", true}, {"b", true}, {"b", true}, {"b", true}, {"b", true}, {"b", false}},
			wantRemoved: []string{"b", "b", "b", "b", "b", "b", "b", "b"}, wantLeft: []string{"a", "c"},
		},
		{
			name: "members the cluster cannot list now are retried", members: three(), deleted: []string{"b"},
			membersErrs: []error{unavailable, unavailable},
			wantSyncs:   []syncResult{{"b", true}, {"b", true}, {"b", false}}, wantRemoved: []string{"b"}, wantLeft: []string{"a", "c"},
		},
		{
			name: "other failures are given up after maxAttempts", members: three(), deleted: []string{"b"},
			removeErrs: []error{boom, boom, boom, boom, boom}, maxAttempts: 3,
			// The third attempt gives up: it reports no failure, and
			// nothing comes back.
			wantSyncs:   []syncResult{{"b", true}, {"b", true}, {"b", false}},
			wantRemoved: []string{"b", "b", "b"}, wantLeft: []string{"a", "b", "c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{members: slices.Clone(tt.members), membersErrs: tt.membersErrs, removeErrs: tt.removeErrs}
			var nodes []string
			for _, m := range tt.members {
				nodes = append(nodes, m.ID)
			}
			maxAttempts := tt.maxAttempts
			if maxAttempts == 0 {
				maxAttempts = 5
			}
			client, syncs, stop := startController(t, f, maxAttempts, append(nodes, tt.nodes...)...)
			del := func(n string) {
				if err := client.CoreV1().Nodes().Delete(t.Context(), n, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var got []syncResult
			next := func() {
				select {
				case s := <-syncs:
					got = append(got, s)
				case <-time.After(10 * time.Second):
					t.Fatalf("attempts so far %v; no more within 10s", got)
				}
			}
			for _, n := range tt.deleted {
				del(n)
			}
			for len(got) < len(tt.wantSyncs) {
				next()
			}
			del(barrier)
			for got[len(got)-1].name != barrier {
				next()
			}
			time.Sleep(30 * time.Millisecond) // > the longest retry delay
			for len(syncs) > 0 {
				next()
			}
			want := append(slices.Clone(tt.wantSyncs), syncResult{barrier, false})
			if !slices.Equal(got, want) {
				t.Errorf("attempts = %v, want %v", got, want)
			}
			if err := stop(); err != nil {
				t.Errorf("Run = %v, want nil once its context ends", err)
			}
			if r := f.removals(); !slices.Equal(r, tt.wantRemoved) {
				t.Errorf("RemoveMember calls = %q, want %q", r, tt.wantRemoved)
			}
			var left []string
			for _, m := range f.members {
				left = append(left, m.ID)
			}
			slices.Sort(left)
			if !slices.Equal(left, tt.wantLeft) {
				t.Errorf("members afterwards = %q, want %q", left, tt.wantLeft)
			}
		})
	}
}

func TestNodeController_StopsRetryingWhenItsContextEnds(t *testing.T) {
	f := &fakeCluster{members: three(), membersErr: errUnavailable}
	client, syncs, stop := startController(t, f, 5, "a", "b", "c")
	if err := client.CoreV1().Nodes().Delete(t.Context(), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // failing, and retried
		select {
		case s := <-syncs:
			if s != (syncResult{"b", true}) {
				t.Fatalf("attempt %v, want a failed one of b", s)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no retry within 10s")
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	// Run has returned: its worker is gone, and nothing attempts any more.
	for len(syncs) > 0 {
		<-syncs
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(syncs); n != 0 {
		t.Errorf("%d attempts after Run returned", n)
	}
}

func TestNodeController_RunNeedsAClientAndACluster(t *testing.T) {
	for _, cfg := range []Config{{Cluster: &fakeCluster{}}, {Client: fake.NewClientset()}} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := NewNodeController(cfg).Run(ctx)
		late := ctx.Err() != nil
		cancel()
		if err == nil || late {
			t.Errorf("Run with %+v = %v, want an immediate error", cfg, err)
		}
	}
}

func TestNameOnly_KeepsWhatTheInformerNeeds(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"x": "y"}},
		Status:     corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}},
	}
	got, err := nameOnly(n)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u1", ResourceVersion: "7"}}
	if g, ok := got.(*corev1.Node); !ok || g.Name != want.Name || g.UID != want.UID || g.ResourceVersion != want.ResourceVersion || g.Labels != nil || g.Status.Images != nil {
		t.Errorf("nameOnly = %+v, want %+v", got, want)
	}
	other := &corev1.Pod{}
	if got, _ := nameOnly(other); got != other {
		t.Errorf("nameOnly(pod) = %v, want it unchanged", got)
	}
}
