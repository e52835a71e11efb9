package e2e

// Linearizability through the API servers: store/storetest's porcupine
// checker drives ConfigMaps through every server's API while a nemesis
// kills leaders and cuts their links. The adapter below makes the API look
// like a store.Store: resourceVersion is the ModRevision, a CAS is an
// update or delete with a resourceVersion precondition.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"skiff/store"
	"skiff/store/storetest"
)

// apiStore is the part of store.Store the checker calls (Get, Create,
// Update, Delete, CurrentRevision), over one server's API. Keys are
// ConfigMap names in namespace default; the value is data.v. The other
// methods are left to the embedded nil interface: the checker never calls
// them.
type apiStore struct {
	store.Store
	rc rest.Interface
}

const apiStoreNS = "default"

// name maps "/linearizable/<nanos>/k3" onto "lz-<nanos>-k3".
func (s apiStore) name(key string) string {
	return "lz" + strings.ReplaceAll(strings.TrimPrefix(key, "/linearizable"), "/", "-")
}

// answer sorts the API's errors into the store's sentinels; anything else
// (503 without quorum, a timeout, a refused connection) stays an unknown
// outcome. Unknown outcomes pause a little: a killed server refuses at
// once, and its workers would otherwise spend the run's operations in a
// tight loop of failures.
func answer(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %v", store.ErrNotFound, err)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%w: %v", store.ErrExists, err)
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	}
	time.Sleep(200 * time.Millisecond)
	return err
}

func (s apiStore) kv(cm *corev1.ConfigMap, create int64) (store.KeyValue, error) {
	rev, err := strconv.ParseInt(cm.ResourceVersion, 10, 64)
	if err != nil {
		return store.KeyValue{}, fmt.Errorf("resourceVersion %q: %w", cm.ResourceVersion, err)
	}
	if create == 0 {
		create = rev
	}
	return store.KeyValue{Key: cm.Name, Value: []byte(cm.Data["v"]), CreateRevision: create, ModRevision: rev}, nil
}

func (s apiStore) Get(ctx context.Context, key string) (store.KeyValue, error) {
	var cm corev1.ConfigMap
	err := s.rc.Get().Namespace(apiStoreNS).Resource("configmaps").Name(s.name(key)).MaxRetries(0).Do(ctx).Into(&cm)
	if err != nil {
		return store.KeyValue{}, answer(err)
	}
	return s.kv(&cm, storetest.NotReported)
}

func (s apiStore) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	in := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name(key)}, Data: map[string]string{"v": string(value)}}
	var cm corev1.ConfigMap
	err := s.rc.Post().Namespace(apiStoreNS).Resource("configmaps").Body(in).MaxRetries(0).Do(ctx).Into(&cm)
	if err != nil {
		return store.KeyValue{}, answer(err)
	}
	return s.kv(&cm, 0) // a create's revision is its CreateRevision
}

// Update is a PUT; expectedRev becomes its resourceVersion (0: none, an
// unconditional update). A conflict returns no current state (ModRevision
// 0), which the model accepts as "only the guard is known".
func (s apiStore) Update(ctx context.Context, key string, value []byte, expectedRev int64) (store.KeyValue, error) {
	in := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name(key)}, Data: map[string]string{"v": string(value)}}
	if expectedRev != 0 {
		in.ResourceVersion = strconv.FormatInt(expectedRev, 10)
	}
	var cm corev1.ConfigMap
	err := s.rc.Put().Namespace(apiStoreNS).Resource("configmaps").Name(in.Name).Body(in).MaxRetries(0).Do(ctx).Into(&cm)
	if err != nil {
		return store.KeyValue{}, answer(err)
	}
	return s.kv(&cm, storetest.NotReported)
}

// Delete answers a Status: neither the old state nor the delete's revision
// is reported.
func (s apiStore) Delete(ctx context.Context, key string, expectedRev int64) (store.KeyValue, int64, error) {
	opts := &metav1.DeleteOptions{}
	if expectedRev != 0 {
		rv := strconv.FormatInt(expectedRev, 10)
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
	}
	err := s.rc.Delete().Namespace(apiStoreNS).Resource("configmaps").Name(s.name(key)).Body(opts).MaxRetries(0).Do(ctx).Error()
	if err != nil {
		return store.KeyValue{}, 0, answer(err)
	}
	return store.KeyValue{CreateRevision: storetest.NotReported}, storetest.NotReported, nil
}

// CurrentRevision is a list's resourceVersion: a quorum list is at least
// as new as every write acknowledged before it.
func (s apiStore) CurrentRevision(ctx context.Context) (int64, error) {
	var l corev1.ConfigMapList
	err := s.rc.Get().Namespace(apiStoreNS).Resource("configmaps").Param("limit", "1").MaxRetries(0).Do(ctx).Into(&l)
	if err != nil {
		return 0, answer(err)
	}
	return strconv.ParseInt(l.ResourceVersion, 10, 64)
}

// linearizableThroughServers runs the checker with one client per server
// and two workers per client while the nemesis alternately kills the
// leader (then restarts it) and cuts its link (then heals it). make test
// runs a history long enough for one kill and one cut (about 10 s);
// SKIFF_LONG=1 runs 30,000 operations, faults all along.
func (c *haCluster) linearizableThroughServers(t *testing.T) {
	ops, rounds := 4000, 2
	if os.Getenv("SKIFF_LONG") != "" {
		ops, rounds = 30000, 1000
	}
	var clients []store.Store
	for _, s := range c.servers {
		cs, _, _ := c.clientVia(s, 4*time.Second)
		clients = append(clients, apiStore{rc: cs.CoreV1().RESTClient()})
	}
	var faults []string
	res := storetest.CheckLinearizable(t, storetest.LinearizableConfig{
		Clients:      clients,
		Workers:      2 * len(clients),
		Ops:          ops,
		Timeout:      4 * time.Second,
		CheckTimeout: 5 * time.Minute,
		Nemesis:      func(ctx context.Context) { faults = c.nemesis(ctx, t, rounds) },
		Visualize:    filepath.Join(t.TempDir(), "api-linearizable.html"),
	})
	t.Logf("FIGURE linearizability through the API: %d ops (%d ok, %d refused, %d unknown) in %v, %.0f ops/s, porcupine %s in %v; faults %v",
		res.Ops, res.Ok, res.Failed, res.Unknown, res.Duration.Round(time.Millisecond), float64(res.Ops)/res.Duration.Seconds(),
		res.Result, res.CheckTime.Round(time.Millisecond), faults)
	if res.Ok == 0 {
		t.Fatalf("no operation succeeded: %+v", res)
	}
	if len(faults) == 0 {
		t.Errorf("the nemesis injected no fault: the history checks nothing about failures")
	}
}

// nemesis injects faults until ctx ends or rounds are done, then leaves
// every server running, linked and ready. It runs off the test's
// goroutine, so it reports with t.Errorf.
func (c *haCluster) nemesis(ctx context.Context, t *testing.T, rounds int) []string {
	pause := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	var faults []string
	for round := 0; round < rounds && pause(500*time.Millisecond); round++ {
		victim, err := c.findLeader()
		if err != nil {
			continue
		}
		if round%2 == 0 {
			faults = append(faults, "kill "+victim.Name)
			victim.Kill()
			pause(time.Second)
			victim.Start()
		} else {
			faults = append(faults, "cut "+victim.Name)
			victim.CutLink()
			pause(3 * time.Second)
			victim.RestoreLink()
		}
		if err := c.readyWithin(victim, 90*time.Second); err != nil {
			t.Errorf("nemesis: %v", err)
			return faults
		}
	}
	return faults
}

// findLeader asks the live servers which one leads.
func (c *haCluster) findLeader() (*netNode, error) {
	var last error = errors.New("no server answered")
	for _, via := range c.servers {
		if !via.Running() {
			continue
		}
		ml, err := c.members(via)
		if err != nil {
			last = err
			continue
		}
		for _, m := range ml.Members {
			for _, s := range c.servers {
				if m.Leader && s.Name == m.Name {
					return s, nil
				}
			}
		}
		last = fmt.Errorf("%s names no leader: %+v", via.Name, ml.Members)
	}
	return nil, last
}

// readyWithin is waitReadyz for goroutines other than the test's.
func (c *haCluster) readyWithin(n *netNode, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		body, code, err := n.Get(fmt.Sprintf("https://%s:%d/readyz", n.IP, netAPIPort), 2*time.Second)
		if err == nil && code == 200 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s /readyz not ok within %v: %d %q %v", n.Name, timeout, code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
