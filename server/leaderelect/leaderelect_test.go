package leaderelect_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"skiff/server/apiserver/apitest"
	"skiff/server/leaderelect"
)

// cuttable fails every request once cut, as a server whose process died or
// whose network went away looks to the others.
type cuttable struct {
	next http.RoundTripper
	cut  atomic.Bool
}

func (c *cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("cut")
	}
	return c.next.RoundTrip(r)
}

type candidate struct {
	name    string
	link    *cuttable
	leading atomic.Bool
	became  atomic.Int32
	cancel  context.CancelFunc
	done    chan struct{}
}

func TestRun_LeaderCut_OtherTakesOverWithoutOverlap(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	admin := kubernetes.NewForConfigOrDie(srv.Config(nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var active, overlaps atomic.Int32
	start := func(name string) *candidate {
		c := &candidate{name: name, done: make(chan struct{})}
		cfg := srv.Config(nil)
		c.link = &cuttable{next: cfg.Transport}
		cfg.Transport = c.link
		cctx, ccancel := context.WithCancel(ctx)
		c.cancel = ccancel
		go func() {
			defer close(c.done)
			err := leaderelect.Run(cctx, leaderelect.Config{
				Client: kubernetes.NewForConfigOrDie(cfg), Name: "kube-controller-manager", Identity: name,
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
				Lead: func(ctx context.Context) {
					if active.Add(1) > 1 {
						overlaps.Add(1)
					}
					c.leading.Store(true)
					c.became.Add(1)
					<-ctx.Done()
					c.leading.Store(false)
					active.Add(-1)
				},
			})
			if err != nil {
				t.Error(err)
			}
		}()
		return c
	}
	a := start("a")
	waitFor(t, ctx, "a to lead", a.leading.Load)
	b := start("b")

	// b must not lead while a renews.
	time.Sleep(4 * time.Second)
	if b.became.Load() != 0 {
		t.Fatal("b led while a was renewing")
	}

	a.link.cut.Store(true)
	waitFor(t, ctx, "b to take over", b.leading.Load)
	if a.leading.Load() {
		t.Error("a still leads after b took over")
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("two leaders at once %d time(s)", n)
	}
	lease, err := admin.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "kube-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *lease.Spec.HolderIdentity; got != "b" {
		t.Errorf("lease holder = %q, want b", got)
	}

	// A clean stop releases the lease: a waits for nobody.
	a.cancel()
	<-a.done
	a2 := start("a2")
	b.cancel()
	<-b.done
	waitFor(t, ctx, "a2 to lead after b released", a2.leading.Load)
	a2.cancel()
	<-a2.done
	if n := overlaps.Load(); n != 0 {
		t.Errorf("two leaders at once %d time(s)", n)
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
