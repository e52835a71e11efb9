package e2e

// Multi-node clusters of real hosts on this machine: each node is a network
// namespace (see netns_test.go) running the skiff binary, all sharing the
// machine's mount namespace, cgroupfs and /var/log/pods as the agent
// contract assumes.
//
// Usage:
//
//	c := newNetCluster(t, netClusterSpec{Agents: 2, TestHost: true})
//	c.server, c.agents[i]            // *netNode: Name, NS, IP, DataDir
//	c.kubectlOK("get", "nodes")      // kubectl in the server's namespace
//	c.clientset()                    // client-go, dialing from the server's namespace
//	c.waitNodesReady(3, 3*time.Minute)
//	c.agents[0].Kill()               // SIGKILL its process group (a crash)
//	c.agents[0].Restart()            // start it again on the same data dir
//	c.agents[0].CutLink()            // pull its cable; RestoreLink plugs it in
//	c.host.URL, c.host.PeerIPs()     // the test host outside the cluster
//
// Everything the cluster made (processes, processes left in its
// namespaces or in pod namespaces mounted under a node's data dir, mounts
// under the data dirs, the namespaces) is removed in t.Cleanup, also on
// failure; node logs are then printed (tail) and kept on disk.

import (
	"skiff/runtime/mountinfo"

	"skiff/runtime/testimage"

	"bytes"
	"context"
	"encoding/json"
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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// netServerOctet is the server's last address octet; agent i (from 0)
	// is netAgentOctet+i.
	netServerOctet = 10
	netAgentOctet  = 20
	netAPIPort     = 6443
	// netLogTail is how much of each node's log a failed test prints.
	netLogTail = 8 << 10
)

// netClusterSpec says what newNetCluster builds.
type netClusterSpec struct {
	// Agents is the number of agent nodes.
	Agents int
	// TestHost runs the test host's HTTP server (the gateway namespace is
	// always made: it is every node's default route).
	TestHost bool
	// DeferAgents makes the agent nodes' namespaces and data dirs but does
	// not start `skiff agent`: the test calls Start on each.
	DeferAgents bool
	// NoServer makes no server process either (network-only tests).
	NoServer bool
	// ServerArgs and AgentArgs are appended to the default flags.
	ServerArgs, AgentArgs []string
	// ServerTimeout bounds the wait for the server's /readyz (60 s).
	ServerTimeout time.Duration
}

// netCluster is a server node, agent nodes and a test host on one lab
// network.
type netCluster struct {
	t      *testing.T
	lab    *netLab
	base   string // data dirs live below
	logDir string // node logs; kept if the test fails
	server *netNode
	// servers are further servers of an HA cluster (ha_test.go); server
	// may point at one of them.
	servers []*netNode
	agents  []*netNode
	host    *testHost

	mu         sync.Mutex
	mountRoots []string
}

// netNode is one machine of the cluster: a namespace, an address, a data
// dir and (while started) a skiff process in its own process group.
type netNode struct {
	c *netCluster
	// Name is the node name; NS the network namespace; IP its address.
	Name, NS string
	IP       net.IP
	// DataDir is the node's --data-dir; LogPath collects its output.
	DataDir, LogPath string
	suffix           string
	args             func() []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	stopped bool // by Stop, Kill or PowerOff: an exit is expected
}

// newNetCluster builds the lab network, starts the server and waits until
// its /readyz answers, then starts the agents (unless DeferAgents).
func newNetCluster(t *testing.T, spec netClusterSpec) *netCluster {
	t.Helper()
	// A short base keeps unix socket paths under a node's data dir within
	// 108 bytes (t.TempDir's names are long). It is removed after the
	// teardown, and only if nothing is still mounted below it.
	base, err := os.MkdirTemp("", "skf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeUnmounted(t, base) })
	logDir, err := os.MkdirTemp("", "skiff-e2e-logs-")
	if err != nil {
		t.Fatal(err)
	}
	c := &netCluster{t: t, base: base, logDir: logDir, mountRoots: []string{base}}
	c.lab = newNetLab(t)
	t.Cleanup(c.teardown)
	c.host = c.lab.startTestHost(spec.TestHost)
	if !spec.NoServer {
		c.server = c.newNode("server", "s", netServerOctet, func() []string { return c.serverArgs(spec.ServerArgs) })
	}
	for i := range spec.Agents {
		var n *netNode
		n = c.newNode(fmt.Sprintf("agent-%d", i+1), fmt.Sprint(i), netAgentOctet+i, func() []string { return c.agentArgs(n, spec.AgentArgs) })
		c.agents = append(c.agents, n)
	}
	if c.server != nil {
		c.server.Start()
		timeout := spec.ServerTimeout
		if timeout == 0 {
			timeout = 60 * time.Second
		}
		c.waitServerReady(timeout)
	}
	if !spec.DeferAgents && c.server != nil {
		for _, a := range c.agents {
			a.Start()
		}
	}
	return c
}

// removeCgroups removes a node's pod cgroups (--cgroup-root) from every
// cgroup v1 controller and the v2 mount, deepest first; their processes
// are gone by now.
func removeCgroups(t *testing.T, rel string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, root := range roots {
		var dirs []string
		filepath.WalkDir(filepath.Join(root, rel), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil {
				t.Logf("remove cgroup %s: %v", dirs[i], err)
			}
		}
		// the shared parent goes when the last node's cgroups are gone
		syscall.Rmdir(filepath.Join(root, filepath.Dir(rel)))
	}
}

// removeUnmounted removes dir unless something is still mounted below it:
// removing through a leftover bind mount would delete the mounted files.
func removeUnmounted(t *testing.T, dir string) {
	if mps, err := mountinfo.Under(dir); err != nil || len(mps) > 0 {
		t.Errorf("not removing %s: still mounted below it: %v %v", dir, mps, err)
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Logf("remove %s: %v", dir, err)
	}
}

func (c *netCluster) newNode(name, suffix string, octet int, args func() []string) *netNode {
	c.t.Helper()
	n := &netNode{
		c: c, Name: name, suffix: suffix, IP: c.lab.addr(octet),
		DataDir: filepath.Join(c.base, name), LogPath: filepath.Join(c.logDir, name+".log"), args: args,
	}
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	seedImages(c.t, n.DataDir)
	n.NS = c.lab.addNamespace(suffix, octet)
	return n
}

var (
	testImageOnce sync.Once
	testImagePath string
	testImageErr  error
)

// seedImages puts the busybox test image (docker.io/library/busybox:latest,
// built from the machine's busybox-static) where the agent imports every
// tarball from at start: the lab has no registry, as an air-gapped box.
func seedImages(t *testing.T, dataDir string) {
	t.Helper()
	testImageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "skiff-image-")
		if err != nil {
			testImageErr = err
			return
		}
		testImagePath = filepath.Join(dir, "busybox.tar")
		testImageErr = testimage.WriteOCI(testImagePath, testimage.DefaultRef)
	})
	if testImageErr != nil {
		t.Fatalf("test image: %v", testImageErr)
	}
	dir := filepath.Join(dataDir, "agent", "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(testImagePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox.tar"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kubeconfig is the admin kubeconfig the server writes (it points at
// 127.0.0.1, so use it from the server's namespace).
func (c *netCluster) kubeconfig() string {
	return filepath.Join(c.server.DataDir, "kc.yaml")
}

// serverURL is the API as nodes reach it.
func (c *netCluster) serverURL() string {
	return fmt.Sprintf("https://%s:%d", c.server.IP, netAPIPort)
}

func (c *netCluster) serverArgs(extra []string) []string {
	n := c.server
	args := []string{"server", "--data-dir", n.DataDir, "--advertise-address", n.IP.String(),
		"--tls-san", n.IP.String(), "--https-listen-port", fmt.Sprint(netAPIPort), "--write-kubeconfig", c.kubeconfig()}
	return append(append(args, nodeArgs(n)...), extra...)
}

func (c *netCluster) agentArgs(n *netNode, extra []string) []string {
	args := []string{"agent", "--server", c.serverURL(), "--token", c.token(), "--data-dir", n.DataDir}
	return append(append(args, nodeArgs(n)...), extra...)
}

// nodeArgs keep each lab node apart from the others and from the machine:
// every node shares the machine's hostname, mount namespace and cgroupfs,
// so names, pod namespaces, logs and cgroups are all per node.
func nodeArgs(n *netNode) []string {
	return []string{"--node-name", n.Name, "--node-ip", n.IP.String(),
		"--netns-dir", filepath.Join(n.DataDir, "netns"), "--pod-log-dir", filepath.Join(n.DataDir, "pod-logs"),
		"--cgroup-root", "/skiff-e2e/" + n.NS}
}

// token is the server's join token (K10<hash>::server:<secret>).
func (c *netCluster) token() string {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.server.DataDir, "server", "token"))
	if err != nil {
		c.t.Fatalf("server token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// nodes is the server (if any) then the agents.
func (c *netCluster) nodes() []*netNode {
	var out []*netNode
	if c.server != nil {
		out = append(out, c.server)
	}
	for _, s := range c.servers {
		if s != c.server {
			out = append(out, s)
		}
	}
	return append(out, c.agents...)
}

// addMountRoot makes teardown also kill the users of pod network
// namespaces mounted below dir, and unmount everything below it (for a
// node configured to keep mounts outside its data dir).
func (c *netCluster) addMountRoot(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mountRoots = append(c.mountRoots, dir)
}

// teardown stops everything newNetCluster made; it runs in t.Cleanup.
func (c *netCluster) teardown() {
	for _, n := range c.nodes() {
		n.signalGroup(syscall.SIGKILL)
		n.waitExit(10 * time.Second)
	}
	if c.host != nil {
		c.host.close()
	}
	c.mu.Lock()
	roots := append([]string(nil), c.mountRoots...)
	c.mu.Unlock()
	for _, r := range roots {
		killNetnsUsersUnder(c.t, r)
	}
	c.lab.teardown()
	for _, r := range roots {
		unmountUnder(c.t, r)
	}
	for _, n := range c.nodes() {
		removeCgroups(c.t, "skiff-e2e/"+n.NS)
	}
	if c.t.Failed() {
		for _, n := range c.nodes() {
			c.t.Logf("=== %s log (%s), last %d bytes:\n%s", n.Name, n.LogPath, netLogTail, n.logTail(netLogTail))
		}
		c.t.Logf("node logs kept in %s", c.logDir)
		return
	}
	os.RemoveAll(c.logDir)
}

// Start starts the node's skiff process in its namespace, in its own
// process group, appending its output to LogPath. The process shares the
// machine's mount namespace (nsenter --net, not `ip netns exec`), so its
// mounts outlive it as on a real machine and a restarted agent finds them.
func (n *netNode) Start() {
	t := n.c.t
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !netIsDone(n.done) {
		t.Fatalf("%s: already running", n.Name)
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := n.args()
	fmt.Fprintf(logf, "=== %s start: skiff %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + n.NS, "--", skiffBin}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("%s: start: %v", n.Name, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.err, n.stopped = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(done)
	}()
}

func netIsDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Running reports whether the node's process is alive.
func (n *netNode) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !netIsDone(n.done)
}

// Exited returns a channel closed when the current process exits (nil if
// never started) and, once it is, the process's error.
func (n *netNode) Exited() (<-chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.done, n.err
}

func (n *netNode) signalGroup(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = true
	if n.cmd != nil && n.cmd.Process != nil && !netIsDone(n.done) {
		syscall.Kill(-n.cmd.Process.Pid, sig)
	}
}

// waitExit waits up to d for the process to exit and reports whether it did.
func (n *netNode) waitExit(d time.Duration) bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop sends SIGTERM to the node's process group, then SIGKILL after 20 s.
func (n *netNode) Stop() {
	n.signalGroup(syscall.SIGTERM)
	if !n.waitExit(20 * time.Second) {
		n.c.t.Logf("%s: no exit 20s after SIGTERM; SIGKILL", n.Name)
		n.Kill()
	}
}

// Kill SIGKILLs the node's process group, as a crash of the process; it
// returns once the process is gone. Processes that left the group
// (containerd shims) keep running, as they would on a real machine.
func (n *netNode) Kill() {
	n.signalGroup(syscall.SIGKILL)
	if !n.waitExit(10 * time.Second) {
		n.c.t.Fatalf("%s: still running 10s after SIGKILL", n.Name)
	}
}

// PowerOff kills every process in the node's namespace (the skiff process,
// its containerd and shims), as a machine losing power.
func (n *netNode) PowerOff() {
	n.Kill()
	killNamespacePids(n.c.t, n.NS)
}

// Restart stops the node's process if it runs, and starts it again on the
// same data dir.
func (n *netNode) Restart() {
	if n.Running() {
		n.Stop()
	}
	n.Start()
}

// CutLink pulls the node's cable: its link is down at the switch, so
// packets to and from it vanish (dials time out; nothing is refused).
func (n *netNode) CutLink() { n.c.lab.setLink(n.suffix, false) }

// RestoreLink plugs the cable back in.
func (n *netNode) RestoreLink() { n.c.lab.setLink(n.suffix, true) }

// Exec runs a command in the node's network namespace and returns its
// combined output.
func (n *netNode) Exec(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + n.NS, "--", name}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Get GETs url from the node's namespace (certificates not verified).
func (n *netNode) Get(url string, timeout time.Duration) (string, int, error) {
	return getIn(n.NS, url, timeout)
}

// Dial opens a TCP connection from the node's namespace.
func (n *netNode) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return dialIn(ctx, n.NS, addr)
}

// Log is the node's output so far (every start).
func (n *netNode) Log() string {
	b, _ := os.ReadFile(n.LogPath)
	return string(b)
}

func (n *netNode) logTail(max int) string {
	s := n.Log()
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}

// checkAlive fails the test if a node's process exited that no Stop, Kill
// or PowerOff ended (the teardown then prints the logs).
func (c *netCluster) checkAlive() {
	c.t.Helper()
	for _, n := range c.nodes() {
		n.mu.Lock()
		died := n.cmd != nil && !n.stopped && netIsDone(n.done)
		err := n.err
		n.mu.Unlock()
		if died {
			c.t.Fatalf("%s exited unexpectedly: %v (its log follows)", n.Name, err)
		}
	}
}

// readyz is the server's /readyz as node from sees it.
func (c *netCluster) readyz(from *netNode, timeout time.Duration) (string, int, error) {
	return from.Get(c.serverURL()+"/readyz", timeout)
}

// waitServerReady polls /readyz from the server's own namespace.
func (c *netCluster) waitServerReady(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var body string
	var code int
	var err error
	for time.Now().Before(deadline) {
		body, code, err = c.readyz(c.server, 2*time.Second)
		if err == nil && code == 200 {
			return
		}
		c.checkAlive()
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("server /readyz not ok within %v: %d %q %v", timeout, code, body, err)
}

// kubectlIn runs kubectl with stdin in the server's namespace against the
// admin kubeconfig, returning stdout, stderr and the error.
func (c *netCluster) kubectlIn(stdin string, args ...string) (string, string, error) {
	return c.kubectlBinIn("kubectl", stdin, args...)
}

// kubectlCmd is the command running the kubectl binary bin (a name on PATH
// or a path, as kubectl.1.27) with args in the server's namespace against
// the admin kubeconfig; nsenter execs kubectl, so the command's process is
// kubectl's. The caller starts it and must make sure it ends.
func (c *netCluster) kubectlCmd(ctx context.Context, bin string, args ...string) *exec.Cmd {
	full := append([]string{"--net=/run/netns/" + c.server.NS, "--", bin, "--kubeconfig", c.kubeconfig()}, args...)
	return exec.CommandContext(ctx, "nsenter", full...)
}

// kubectlBinIn is kubectlIn with the kubectl binary bin (60 s at most).
func (c *netCluster) kubectlBinIn(bin, stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.kubectlCmd(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// kubectl runs kubectl in the server's namespace; stdout, and an error
// carrying stderr.
func (c *netCluster) kubectl(args ...string) (string, error) {
	out, errOut, err := c.kubectlIn("", args...)
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errOut)
	}
	return out, nil
}

// kubectlOK runs kubectl, which must succeed, and returns its stdout.
func (c *netCluster) kubectlOK(args ...string) string {
	c.t.Helper()
	out, err := c.kubectl(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// restConfig is the admin kubeconfig with connections dialed from the
// server's namespace, for client-go from the test process.
func (c *netCluster) restConfig() *rest.Config {
	c.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		c.t.Fatalf("load %s: %v", c.kubeconfig(), err)
	}
	ns := c.server.NS
	cfg.Dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, ns, addr) }
	return cfg
}

// clientset is a typed client-go client for the admin (see restConfig).
func (c *netCluster) clientset() kubernetes.Interface {
	c.t.Helper()
	cs, err := kubernetes.NewForConfig(c.restConfig())
	if err != nil {
		c.t.Fatal(err)
	}
	return cs
}

// readyNodes lists the names of Nodes whose Ready condition is True.
func (c *netCluster) readyNodes() ([]string, error) {
	out, err := c.kubectl("get", "nodes", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list corev1.NodeList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("decode nodes: %w", err)
	}
	var ready []string
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	return ready, nil
}

// waitNodesReady waits until at least n Nodes are Ready and returns their
// names. It needs agents that join (build tag agente2e for now).
func (c *netCluster) waitNodesReady(n int, timeout time.Duration) []string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var ready []string
	var err error
	for time.Now().Before(deadline) {
		c.checkAlive()
		ready, err = c.readyNodes()
		if err == nil && len(ready) >= n {
			return ready
		}
		time.Sleep(time.Second)
	}
	c.t.Fatalf("%d nodes Ready within %v, want %d (last error %v); nodes:\n%s", len(ready), timeout, n, err, c.kubectlNoFail("get", "nodes", "-o", "wide"))
	return nil
}

func (c *netCluster) kubectlNoFail(args ...string) string {
	out, err := c.kubectl(args...)
	if err != nil {
		return err.Error()
	}
	return out
}
