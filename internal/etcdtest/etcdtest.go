// Package etcdtest runs real etcd clusters for tests: the etcd server
// binary (built once, see BuildBinary) started as 1 or more member processes
// on loopback, optionally with TLS between everyone, data in a test temp
// dir, stopped in the test's cleanup. Members can be killed and restarted.
package etcdtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Options shape a cluster.
type Options struct {
	// Members is the number of members (default 1).
	Members int
	// TLS serves clients and peers over TLS with a throwaway CA and requires
	// client certificates on both; CAFile, CertFile and KeyFile are then a
	// client's files.
	TLS bool
	// Hosts, when set (one per member), runs member i in the network
	// namespace Hosts[i].Netns (a path such as /run/netns/x, entered with
	// nsenter) on Hosts[i].IP, at etcd's own ports 2379 and 2380: the
	// members are then machines of a test's lab network.
	Hosts []Host
	// Dial reaches a member's client address from the test process; it is
	// needed with Hosts, whose addresses the test's namespace cannot reach.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// Host is where a member runs (Options.Hosts).
type Host struct {
	IP    string
	Netns string
}

// Cluster is a running etcd cluster.
type Cluster struct {
	tb      testing.TB
	bin     string
	dir     string
	tls     bool
	pki     pki
	token   string
	dial    func(ctx context.Context, addr string) (net.Conn, error)
	members []*member
}

type member struct {
	name, dataDir, logPath string
	netns                  string // "" runs in the test's namespace
	clientURL, peerURL     string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
}

// Start starts a cluster and waits until it serves linearizable reads. It
// fails the test on error, so call it from the test's goroutine.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	c, err := Launch(tb, opts)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return c
}

// Launch is Start returning its error instead of failing the test, for use
// off the test's goroutine. The cluster is still stopped in tb's cleanup.
func Launch(tb testing.TB, opts Options) (*Cluster, error) {
	if len(opts.Hosts) > 0 {
		opts.Members = len(opts.Hosts)
	}
	if opts.Members <= 0 {
		opts.Members = 1
	}
	bin, err := BuildBinary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	// Free ports are picked before etcd binds them; another process may take
	// one in between, so a start that lost that race is tried again.
	for attempt := 0; attempt < 3; attempt++ {
		c, err := launch(tb, bin, opts, attempt)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func launch(tb testing.TB, bin string, opts Options, attempt int) (*Cluster, error) {
	c := &Cluster{tb: tb, bin: bin, dir: tb.TempDir(), tls: opts.TLS,
		token: fmt.Sprintf("etcdtest-%d-%d", time.Now().UnixNano(), attempt), dial: opts.Dial}
	if c.dial == nil {
		var d net.Dialer
		c.dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if opts.TLS {
		var ips []net.IP
		for _, h := range opts.Hosts {
			ips = append(ips, net.ParseIP(h.IP))
		}
		var err error
		if c.pki, err = writePKI(c.dir, ips); err != nil {
			return nil, fmt.Errorf("certificates: %w", err)
		}
	}
	ports, err := freePorts(2 * opts.Members)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if opts.TLS {
		scheme = "https"
	}
	for i := 0; i < opts.Members; i++ {
		name := fmt.Sprintf("m%d", i)
		m := &member{
			name:      name,
			dataDir:   filepath.Join(c.dir, name+".etcd"),
			logPath:   filepath.Join(c.dir, name+".log"),
			clientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			peerURL:   fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i+1]),
		}
		if len(opts.Hosts) > 0 {
			h := opts.Hosts[i]
			m.netns = h.Netns
			m.clientURL = fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(h.IP, "2379"))
			m.peerURL = fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(h.IP, "2380"))
		}
		c.members = append(c.members, m)
	}
	tb.Cleanup(c.cleanup)
	for i := range c.members {
		if err := c.start(i); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		c.stopAll()
		return nil, err
	}
	return c, nil
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// args is member i's command line. --initial-cluster* only matter on the
// first start: a restarted member finds its WAL and rejoins from it.
func (c *Cluster) args(i int) []string {
	m := c.members[i]
	var initial []string
	for _, o := range c.members {
		initial = append(initial, o.name+"="+o.peerURL)
	}
	a := []string{
		"--name", m.name, "--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
		"--initial-cluster-token", c.token,
	}
	if c.tls {
		p := c.pki
		a = append(a,
			"--cert-file", p.MemberCert, "--key-file", p.MemberKey,
			"--trusted-ca-file", p.CA, "--client-cert-auth",
			"--peer-cert-file", p.MemberCert, "--peer-key-file", p.MemberKey,
			"--peer-trusted-ca-file", p.CA, "--peer-client-cert-auth")
	}
	return a
}

// start runs member i's process and returns once it accepts client
// connections (or has exited, which is an error).
func (c *Cluster) start(i int) error {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return fmt.Errorf("member %s is already running", m.name)
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== etcdtest: starting %s at %s\n", m.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, c.args(i)...)
	if m.netns != "" {
		// nsenter enters the namespace and execs etcd: the process and
		// its signals are etcd's own.
		cmd = exec.Command("nsenter", append([]string{"--net=" + m.netns, "--", c.bin}, c.args(i)...)...)
	}
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test process dies without cleaning up, the member dies too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start etcd %s: %w", m.name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.cmd, m.done = cmd, done
	addr := strings.TrimPrefix(strings.TrimPrefix(m.clientURL, "https://"), "http://")
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			m.cmd = nil
			return fmt.Errorf("etcd %s exited at start: %s", m.name, c.logTail(i, 15))
		default:
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := c.dial(dctx, addr)
		cancel()
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd %s does not accept connections on %s: %s", m.name, addr, c.logTail(i, 15))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanEnv is the test's environment without ETCD_* variables, which etcd
// would read as flags.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// signal sends sig to member i and waits for it to exit (SIGKILL after
// 10s). It is a no-op for a member that is not running.
func (c *Cluster) signal(i int, sig syscall.Signal) {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(sig)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
	m.cmd = nil
}

// Kill SIGKILLs member i and waits for it to be gone.
func (c *Cluster) Kill(i int) { c.signal(i, syscall.SIGKILL) }

// Stop stops member i gracefully (SIGTERM) and waits for it to be gone.
func (c *Cluster) Stop(i int) { c.signal(i, syscall.SIGTERM) }

// Restart starts member i again on its data directory, after Kill or Stop,
// and returns once it accepts client connections; it may still be
// rejoining. It fails the test on error.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	if err := c.start(i); err != nil {
		c.tb.Fatalf("etcdtest: restart: %v", err)
	}
}

// Running says whether member i's process is up.
func (c *Cluster) Running(i int) bool {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// Members is the number of members.
func (c *Cluster) Members() int { return len(c.members) }

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// Endpoint is member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.members[i].clientURL }

// CAFile is the CA certificate clients trust ("" without TLS).
func (c *Cluster) CAFile() string { return c.pki.CA }

// CertFile is a client certificate the members accept ("" without TLS).
func (c *Cluster) CertFile() string { return c.pki.ClientCert }

// KeyFile is CertFile's key ("" without TLS).
func (c *Cluster) KeyFile() string { return c.pki.ClientKey }

// Leader returns the index of the member that is leader, as reported by
// the running members, or -1 when none reports one within ctx.
func (c *Cluster) Leader(ctx context.Context) int {
	for ctx.Err() == nil {
		if i := c.leaderOnce(ctx); i >= 0 {
			return i
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return -1
}

func (c *Cluster) leaderOnce(ctx context.Context) int {
	for i, m := range c.members {
		if !c.Running(i) {
			continue
		}
		cli, err := c.client([]string{m.clientURL})
		if err != nil {
			return -1
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, m.clientURL)
		cancel()
		cli.Close()
		if err != nil || st.Leader == 0 {
			continue
		}
		if st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// client is an etcd client for eps with the cluster's client certificate.
func (c *Cluster) client(eps []string) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(c.dial)}}
	if c.tls {
		ca, err := os.ReadFile(c.pki.CA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		cert, err := tls.LoadX509KeyPair(c.pki.ClientCert, c.pki.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.TLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return clientv3.New(cfg)
}

// waitHealthy waits until every member serves a linearizable read.
func (c *Cluster) waitHealthy(ctx context.Context) error {
	for i, m := range c.members {
		cli, err := c.client([]string{m.clientURL})
		if err != nil {
			return err
		}
		for {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = cli.Get(rctx, "etcdtest-health")
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cli.Close()
		if err != nil {
			return fmt.Errorf("etcd %s is not healthy: %w: %s", m.name, err, c.logTail(i, 15))
		}
	}
	return nil
}

func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for i := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Stop(i)
		}()
	}
	wg.Wait()
}

func (c *Cluster) cleanup() {
	c.stopAll()
	if c.tb.Failed() {
		for i, m := range c.members {
			c.tb.Logf("etcdtest: last lines of %s's log (%s):\n%s", m.name, m.logPath, c.logTail(i, 30))
		}
	}
}

// logTail is the last n lines of member i's log.
func (c *Cluster) logTail(i, n int) string {
	f, err := os.Open(c.members[i].logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		lines = append(lines, "(log read: "+err.Error()+")")
	}
	return strings.Join(lines, "\n")
}
