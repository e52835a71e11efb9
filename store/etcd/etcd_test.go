package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"skiff/internal/etcdtest"
	"skiff/store"
	"skiff/store/etcd"
	"skiff/store/storetest"
)

// The conformance suite hands the backend a directory and calls its data
// "the store persisted in dir": reopening dir must find the same data, and
// the crash test reopens it after SIGKILLing a writer process. With an
// external etcd the data lives in etcd, so each directory stands for one
// etcd cluster (one member) started on first use and kept until the suite
// ends: "reopen" is a new client to the same etcd, and the crash test
// kills the writer — skiff — mid-storm while its etcd lives on, which is
// what a server crash is with an external datastore.
//
// The writer runs in a child process that cannot start clusters the parent
// would own and clean up, so it asks the parent: the parent serves a
// one-line protocol on loopback (directory in, endpoints out) whose
// address the child finds in its environment.

const brokerEnv = "SKIFF_ETCD_TEST_BROKER"

func TestMain(m *testing.M) {
	storetest.CrashChildMain(openViaBroker)
	os.Exit(m.Run())
}

func testConfig(endpoints []string) etcd.Config {
	return etcd.Config{Endpoints: endpoints, RequestTimeout: 10 * time.Second}
}

func TestStore_Conformance(t *testing.T) {
	reg := newRegistry(t)
	t.Setenv(brokerEnv, reg.serve(t))
	storetest.Run(t, reg.open)
}

// registry maps a suite directory to its etcd cluster.
type registry struct {
	tb    testing.TB
	mu    sync.Mutex
	byDir map[string]*etcdtest.Cluster
}

func newRegistry(tb testing.TB) *registry {
	return &registry{tb: tb, byDir: map[string]*etcdtest.Cluster{}}
}

func (r *registry) cluster(dir string) (*etcdtest.Cluster, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.byDir[dir]; ok {
		return c, nil
	}
	c, err := etcdtest.Launch(r.tb, etcdtest.Options{Members: 1})
	if err != nil {
		return nil, err
	}
	r.byDir[dir] = c
	return c, nil
}

func (r *registry) open(ctx context.Context, dir string) (store.Store, error) {
	c, err := r.cluster(dir)
	if err != nil {
		return nil, err
	}
	return etcd.Open(ctx, testConfig(c.Endpoints()))
}

// serve answers the child's requests until the test ends and returns the
// address to dial.
func (r *registry) serve(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(2 * time.Minute))
				dir, err := bufio.NewReader(conn).ReadString('\n')
				if err != nil {
					return
				}
				c, err := r.cluster(strings.TrimSpace(dir))
				if err != nil {
					fmt.Fprintf(conn, "ERR %v\n", strings.ReplaceAll(err.Error(), "\n", " "))
					return
				}
				fmt.Fprintf(conn, "%s\n", strings.Join(c.Endpoints(), ","))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// openViaBroker is the crash writer's OpenFunc: the parent test's registry
// gives it the endpoints of dir's cluster.
func openViaBroker(ctx context.Context, dir string) (store.Store, error) {
	addr := os.Getenv(brokerEnv)
	if addr == "" {
		return nil, fmt.Errorf("%s is not set", brokerEnv)
	}
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := fmt.Fprintf(conn, "%s\n", dir); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "ERR ") {
		return nil, fmt.Errorf("broker: %s", line)
	}
	return etcd.Open(ctx, testConfig(strings.Split(line, ",")))
}
