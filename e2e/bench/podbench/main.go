// Command podbench measures a real skiff node: the time from `skiff server`
// start to a Ready node, the pod startup latency (create → Running, image
// already present) of -n pods on that one node, the CPU time that costs, and
// the memory of the skiff process (server + in-process agent), of the
// embedded containerd daemon and of the containerd shims, idle and with the
// pods running.
//
// It never runs skiff in the machine's own network namespace (the agent
// programs bridges, routes and nftables): it makes a namespace holding lo
// and eth0 (one end of a veth pair whose other end stays in the namespace:
// a stand-in for a dummy link, which not every kernel has) with -node-ip/24
// and a default route via .254, starts `skiff server` there with nsenter, a
// fresh --data-dir under /tmp and per-run --netns-dir, --pod-log-dir and
// --cgroup-root, and talks to the API through a dialer that opens its
// sockets inside that namespace. The busybox test image
// (skiff/runtime/testimage) is seeded into <data-dir>/agent/images, so pods
// with imagePullPolicy Never run offline.
//
// With -agent the measured node is a `skiff agent` process instead: the
// server runs with --disable-agent in one namespace, the agent (node IP
// -node-ip + 1) in a second one joined to it by a veth pair; start → Ready
// is then counted from the agent's start, and memory is the agent's (the
// server's is shown apart).
//
// Phases and figures:
//
//  1. start: process start → kubeconfig written, → /readyz ok, → Node
//     registered, → Node Ready (polled every 10 ms), and the agent's own
//     "node ready … startup=" log line.
//  2. idle: after -idle, RSS, PSS and anonymous memory of skiff, containerd
//     and the shims (/proc/<pid>/smaps_rollup). RSS counts the pages of the
//     shared skiff executable in every process; PSS splits them.
//  3. pods: -n busybox `sleep 3600` pods (imagePullPolicy Never, grace
//     period 0) created by -clients concurrent clients, each its own
//     connection, as fast as they can or at -rate pods/s. A pod's latency is
//     the time an informer's watch event first shows it Running minus the
//     time its create call returned (the API's timestamps have a resolution
//     of one second). Prints p50/p90/p99/max, the create rate, pods/s to
//     Running, and the CPU time used meanwhile by the machine, skiff,
//     containerd, the shims (with the runc runs they reaped) and the
//     containers (runc init before exec) — what is left is other processes
//     and kernel threads.
//  4. loaded: memory with the pods running (right away and after -settle).
//  5. delete: all pods deleted by -clients clients; time until the API has
//     none left and until no shim is left.
//
// -cpuprofile takes a CPU profile of the server process (/debug/pprof)
// while the pods start; -goroutines a goroutine dump.
//
// Everything is removed at the end, also on ^C, errors or -timeout: the
// process groups are killed, processes left in the namespaces or in pod
// namespaces mounted below the data dirs are killed, mounts below the data
// dirs are detached, the namespaces, the cgroups and the data dirs removed
// (-keep keeps the data dirs and logs).
//
//	go build -o /tmp/skiff-bench . && go run ./e2e/bench/podbench -skiff /tmp/skiff-bench -n 100
//
// It must run as root.
package main

import (
	"skiff/runtime/mountinfo"

	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/runtime/testimage"
)

const (
	benchLabel = "skiff.io/podbench"
	nodeName   = "podbench"
	apiPort    = 6443
)

type options struct {
	skiff        string
	n, clients   int
	nodeIP       string
	nsName       string
	idle, settle time.Duration
	readyTimeout time.Duration
	timeout      time.Duration
	keep         bool
	cpuProfile   string
	profileSecs  int
	serverArgs   string
	agent        bool
	goroutines   string
	goroutinesAt time.Duration
	rate         float64
}

func main() {
	var o options
	flag.StringVar(&o.skiff, "skiff", "bin/skiff", "skiff binary")
	flag.IntVar(&o.n, "n", 100, "pods to create")
	flag.IntVar(&o.clients, "clients", 8, "concurrent clients creating and deleting pods, each its own connection")
	flag.StringVar(&o.nodeIP, "node-ip", "10.250.0.2", "address of the node (on a dummy interface in the namespace; /24, default route via .1)")
	flag.StringVar(&o.nsName, "netns", "", "network namespace name (default skfpb<pid>); must not exist")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "idle time after the node is Ready before the idle RSS")
	flag.DurationVar(&o.settle, "settle", 10*time.Second, "wait after all pods are Running before the second loaded RSS")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for the node to be Ready")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up (and clean up) after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the data dir and the server log")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the skiff process taken while the pods start (/debug/pprof/profile) to this file")
	flag.IntVar(&o.profileSecs, "profile-seconds", 10, "length of the -cpuprofile profile")
	flag.StringVar(&o.serverArgs, "server-args", "", "extra `skiff server` flags, space-separated")
	flag.BoolVar(&o.agent, "agent", false, "measure a `skiff agent` node: run `skiff server --disable-agent` in one namespace and `skiff agent` (node IP -node-ip+1) in a second, joined by a veth pair")
	flag.StringVar(&o.goroutines, "goroutines", "", "write the skiff server's goroutines (/debug/pprof/goroutine?debug=1) to this file, -goroutines-after the first pod create")
	flag.DurationVar(&o.goroutinesAt, "goroutines-after", 3*time.Second, "when to take -goroutines")
	flag.Float64Var(&o.rate, "rate", 0, "create pods at this many per second in total (0: as fast as the clients can)")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "podbench must run as root (network namespaces, mounts, cgroups)")
		os.Exit(2)
	}
	if o.nsName == "" {
		o.nsName = fmt.Sprintf("skfpb%d", os.Getpid())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	b := &bench{o: o}
	err := b.run(ctx)
	b.cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podbench:", err)
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "podbench: stopped:", context.Cause(ctx))
		}
		os.Exit(1)
	}
}

// proc is one skiff process and the machine it runs on: a network
// namespace, an address and a data dir.
type proc struct {
	role    string // "server" or "agent"
	ns, ip  string
	dataDir string
	logPath string
	cgroup  string
	nsMade  bool

	cmd  *exec.Cmd
	done chan struct{}
	t0   time.Time
}

type bench struct {
	o     options
	skiff string // absolute path of the binary
	srv   *proc
	agt   *proc // with -agent
	node  *proc // the measured node: agt with -agent, else srv
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (b *bench) procs() []*proc {
	if b.agt != nil {
		return []*proc{b.agt, b.srv}
	}
	return []*proc{b.srv}
}

func newProc(role, ns, ip string) (*proc, error) {
	// A short data dir: containerd's sockets live below it (< 108 bytes).
	dir, err := os.MkdirTemp("/tmp", "skpb")
	if err != nil {
		return nil, err
	}
	return &proc{role: role, ns: ns, ip: ip, dataDir: dir, logPath: filepath.Join(dir, role+".log"),
		cgroup: "/skiff-podbench/" + ns}, nil
}

func (b *bench) run(ctx context.Context) error {
	o := b.o
	skiff, err := filepath.Abs(o.skiff)
	if err != nil {
		return err
	}
	b.skiff = skiff
	if fi, err := os.Stat(skiff); err != nil || fi.IsDir() {
		return fmt.Errorf("skiff binary %s: %v", skiff, err)
	}
	ip := net.ParseIP(o.nodeIP).To4()
	if ip == nil || ip[3] >= 253 {
		return fmt.Errorf("-node-ip %q: want an IPv4 address a.b.c.d with d < 253", o.nodeIP)
	}
	if b.srv, err = newProc("server", o.nsName, o.nodeIP); err != nil {
		return err
	}
	b.node = b.srv
	if o.agent {
		aip := net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
		if b.agt, err = newProc("agent", o.nsName+"a", aip); err != nil {
			return err
		}
		b.node = b.agt
	}
	if err := seedImage(b.node.dataDir); err != nil {
		return fmt.Errorf("seed test image: %w", err)
	}
	if err := b.makeNamespaces(); err != nil {
		return err
	}
	if fi, err := os.Stat(skiff); err == nil {
		fmt.Printf("binary: %s (%.1f MiB)\n", skiff, float64(fi.Size())/(1<<20))
	}
	for _, p := range b.procs() {
		fmt.Printf("%s: namespace %s, ip %s, data dir %s\n", p.role, p.ns, p.ip, p.dataDir)
	}
	fmt.Printf("cpus: %d\n", runtime.NumCPU())

	// Phase 1: start → Ready.
	if err := b.start(skiff, b.srv); err != nil {
		return err
	}
	startup, err := b.waitReady(ctx)
	if err != nil {
		return err
	}
	cs, err := b.client(10)
	if err != nil {
		return err
	}
	fmt.Printf("\n== start → Ready\n")
	startup.print(o.agent)
	if line := b.agentReadyLine(); line != "" {
		fmt.Printf("  agent log: %s\n", line)
	}

	// Phase 2: idle memory.
	logf("idle %v", o.idle)
	if err := b.sleep(ctx, o.idle); err != nil {
		return err
	}
	fmt.Printf("\n== memory, idle (%v after Ready)\n", o.idle)
	b.memory().print()

	// Phase 3: pods.
	if err := b.waitServiceAccount(ctx, cs); err != nil {
		return err
	}
	var prof chan error
	if o.cpuProfile != "" {
		prof = make(chan error, 1)
		go func() { prof <- b.profile(ctx) }()
	}
	err = b.runPods(ctx)
	if prof != nil {
		if perr := <-prof; perr != nil {
			fmt.Printf("  cpu profile: %v\n", perr)
		} else {
			fmt.Printf("  cpu profile: %s (go tool pprof %s %s)\n", o.cpuProfile, skiff, o.cpuProfile)
		}
	}
	return err
}

// ---- namespace, process, cleanup ----

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// makeNamespaces makes the server's namespace (and with -agent the
// agent's): lo up, eth0 with the node's /24 address and a default route
// via .254 of it. Alone, eth0 is one end of a veth pair whose other end
// stays in the namespace (a stand-in for a dummy link, which not every
// kernel has); with -agent, the pair joins the two namespaces.
func (b *bench) makeNamespaces() error {
	for _, p := range b.procs() {
		if err := ipCmd("netns", "add", p.ns); err != nil {
			return err
		}
		p.nsMade = true
		if err := ipCmd("-n", p.ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	peer := []string{"peer", "name", "eth0-peer"}
	if b.agt != nil {
		peer = []string{"peer", "name", "eth0", "netns", b.agt.ns}
	}
	if err := ipCmd(append([]string{"-n", b.srv.ns, "link", "add", "eth0", "type", "veth"}, peer...)...); err != nil {
		return err
	}
	if b.agt == nil {
		if err := ipCmd("-n", b.srv.ns, "link", "set", "eth0-peer", "up"); err != nil {
			return err
		}
	}
	for _, p := range b.procs() {
		gw := net.ParseIP(p.ip).To4()
		gw = net.IPv4(gw[0], gw[1], gw[2], 254)
		for _, args := range [][]string{
			{"-n", p.ns, "link", "set", "eth0", "up"},
			{"-n", p.ns, "addr", "add", p.ip + "/24", "dev", "eth0"},
			{"-n", p.ns, "route", "add", "default", "via", gw.String(), "dev", "eth0"},
		} {
			if err := ipCmd(args...); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) start(skiff string, p *proc) error {
	d := p.dataDir
	args := []string{"--net=/run/netns/" + p.ns, "--", skiff}
	if p.role == "server" {
		args = append(args, "server", "--advertise-address", p.ip, "--tls-san", p.ip,
			"--https-listen-port", strconv.Itoa(apiPort), "--write-kubeconfig", filepath.Join(d, "kc.yaml"))
		if b.agt != nil {
			args = append(args, "--disable-agent")
		}
	} else {
		tok, err := os.ReadFile(filepath.Join(b.srv.dataDir, "server", "token"))
		if err != nil {
			return fmt.Errorf("join token: %w", err)
		}
		args = append(args, "agent", "--server", fmt.Sprintf("https://%s:%d", b.srv.ip, apiPort),
			"--token", strings.TrimSpace(string(tok)))
	}
	args = append(args, "--data-dir", d, "--node-name", nodeName, "--node-ip", p.ip,
		"--netns-dir", filepath.Join(d, "netns"), "--pod-log-dir", filepath.Join(d, "pod-logs"),
		"--cgroup-root", p.cgroup)
	if p.role == "server" {
		args = append(args, strings.Fields(b.o.serverArgs)...)
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.t0 = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start skiff %s: %w", p.role, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	shown := slices.Clone(args[3:])
	for i, a := range shown {
		if i > 0 && shown[i-1] == "--token" {
			shown[i] = a[:min(len(a), 12)] + "…"
		}
	}
	logf("started skiff %s, pid %d: skiff %s", p.role, cmd.Process.Pid, strings.Join(shown, " "))
	return nil
}

func (p *proc) exited() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) logTail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// dead reports a skiff process that exited, with its log tail.
func (b *bench) dead() error {
	for _, p := range b.procs() {
		if p.exited() {
			return fmt.Errorf("skiff %s exited; log tail:\n%s", p.role, p.logTail(4096))
		}
	}
	return nil
}

func (b *bench) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			return b.dead()
		case <-tick.C:
			if err := b.dead(); err != nil {
				return err
			}
		}
	}
}

// cleanup removes everything run made; it logs instead of failing.
func (b *bench) cleanup() {
	ps := b.procs()
	if b.srv == nil {
		return
	}
	for _, p := range ps {
		p.stop()
	}
	for _, p := range ps {
		killNetnsUsersUnder(p.dataDir)
		if p.nsMade {
			killNamespacePids(p.ns)
		}
		// Containers may take a moment to die after SIGKILL before
		// their namespaces' mounts can go.
		for range 3 {
			unmountUnder(p.dataDir)
			if mps, _ := mountinfo.Under(p.dataDir); len(mps) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, p := range ps {
		if p.nsMade {
			if err := ipCmd("netns", "del", p.ns); err != nil {
				logf("cleanup: %v", err)
			}
		}
		removeCgroups(p.cgroup)
		if b.o.keep {
			logf("kept %s (log %s)", p.dataDir, p.logPath)
			continue
		}
		if mps, err := mountinfo.Under(p.dataDir); err != nil || len(mps) > 0 {
			logf("cleanup: not removing %s: still mounted below it: %v %v", p.dataDir, mps, err)
			continue
		}
		if err := os.RemoveAll(p.dataDir); err != nil {
			logf("cleanup: %v", err)
		}
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after 15 s.
func (p *proc) stop() {
	if p == nil || p.cmd == nil || p.exited() {
		return
	}
	pid := p.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		logf("cleanup: skiff %s did not stop within 15s of SIGTERM; killing its process group", p.role)
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		logf("cleanup: skiff %s survives SIGKILL", p.role)
	}
}

// killNamespacePids SIGKILLs every process in network namespace ns until
// none is left (10 s at most).
func killNamespacePids(ns string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return
		}
		var pids []int
		for _, p := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			logf("cleanup: namespace %s: processes %v survive SIGKILL", ns, pids)
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killNetnsUsersUnder SIGKILLs every process whose network namespace is
// bind-mounted below root (the pods' namespaces).
func killNetnsUsersUnder(root string) {
	mps, err := mountinfo.Under(root)
	if err != nil {
		return
	}
	inodes := map[string]bool{}
	for _, mp := range mps {
		var st syscall.Stat_t
		if err := syscall.Stat(mp, &st); err == nil {
			inodes[fmt.Sprintf("net:[%d]", st.Ino)] = true
		}
	}
	if len(inodes) == 0 {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		link, err := os.Readlink(p)
		if err != nil || !inodes[link] {
			continue
		}
		if pid, err := strconv.Atoi(strings.Split(p, "/")[2]); err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func unmountUnder(root string) {
	mps, err := mountinfo.Under(root)
	if err != nil {
		logf("cleanup: mounts under %s: %v", root, err)
		return
	}
	for _, mp := range mps {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			logf("cleanup: unmount %s: %v", mp, err)
		}
	}
}

// removeCgroups removes cgroup dir (and everything below it, deepest first)
// in every mounted hierarchy, and its parent if that is then empty.
func removeCgroups(dir string) {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		root := filepath.Join(h, dir)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.SliceStable(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for range 20 { // a killed task may take a moment to leave
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				logf("cleanup: rmdir %s: %v", d, err)
			}
		}
		syscall.Rmdir(filepath.Dir(root)) // /skiff-podbench, if empty
	}
}

// ---- image ----

func seedImage(dataDir string) error {
	dir := filepath.Join(dataDir, "agent", "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return testimage.WriteOCI(filepath.Join(dir, "busybox.tar"), testimage.DefaultRef)
}

// ---- API access from inside the namespace ----

// inNetns runs fn on an OS thread switched into namespace ns, then switches
// the thread back (or lets it die with the goroutine if that fails).
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current netns: %w", err)
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", ns, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", ns, err)
			return
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func (b *bench) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(b.srv.ns, func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// restConfig is the admin kubeconfig with a dialer in the node's namespace
// and no client-side rate limit; every config made here gets its own
// connection (a distinct Dial func defeats client-go's transport cache).
func (b *bench) restConfig(timeout time.Duration) (*rest.Config, error) {
	cc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(b.srv.dataDir, "kc.yaml"))
	if err != nil {
		return nil, err
	}
	cc.QPS, cc.Burst, cc.RateLimiter = -1, 0, nil
	cc.Timeout = timeout
	cc.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) { return b.dial(ctx, network, addr) }
	cc.UserAgent = "podbench"
	return cc, nil
}

func (b *bench) client(timeoutSec int) (*kubernetes.Clientset, error) {
	cc, err := b.restConfig(time.Duration(timeoutSec) * time.Second)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cc)
}

// ---- phase 1: start → Ready ----

type startupTimes struct {
	kubeconfig, readyz, registered, ready time.Duration
}

func (s startupTimes) print(agent bool) {
	fmt.Printf("  kubeconfig written  %8s   (server start →)\n", ms(s.kubeconfig))
	fmt.Printf("  /readyz ok          %8s   (server start →)\n", ms(s.readyz))
	from := "server start →"
	if agent {
		from = "`skiff agent` start →"
	}
	fmt.Printf("  Node registered     %8s   (%s)\n", ms(s.registered), from)
	fmt.Printf("  Node Ready          %8s   (%s; aim: < 3 s)\n", ms(s.ready), from)
}

// waitReady waits for the server's kubeconfig and /readyz, starts the
// agent (with -agent), then waits for the node to be Ready, polling every
// 10 ms.
func (b *bench) waitReady(ctx context.Context) (startupTimes, error) {
	var st startupTimes
	deadline := time.Now().Add(b.o.readyTimeout)
	tick := func() error {
		if err := b.dead(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node not Ready within %v (kubeconfig %v, readyz %v, registered %v); log tail:\n%s",
				b.o.readyTimeout, st.kubeconfig, st.readyz, st.registered, b.node.logTail(4096))
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Millisecond):
			return nil
		}
	}
	kc := filepath.Join(b.srv.dataDir, "kc.yaml")
	for {
		if fi, err := os.Stat(kc); err == nil && fi.Size() > 0 {
			st.kubeconfig = time.Since(b.srv.t0)
			break
		}
		if err := tick(); err != nil {
			return st, err
		}
	}
	var cs *kubernetes.Clientset
	for cs == nil {
		c, err := b.client(2)
		if err == nil {
			cs = c
			break
		}
		if err := tick(); err != nil {
			return st, err
		}
	}
	for {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			st.readyz = time.Since(b.srv.t0)
			break
		}
		if err := tick(); err != nil {
			return st, err
		}
	}
	if b.agt != nil {
		if err := b.start(b.skiff, b.agt); err != nil {
			return st, err
		}
	}
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil {
			if st.registered == 0 {
				st.registered = time.Since(b.node.t0)
			}
			for _, c := range node.Status.Conditions {
				if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
					st.ready = time.Since(b.node.t0)
					logf("node Ready %v after start", ms(st.ready))
					return st, nil
				}
			}
		}
		if err := tick(); err != nil {
			return st, err
		}
	}
}

var readyLineRE = regexp.MustCompile(`node ready`)

// agentReadyLine is the agent's "node ready … startup=" log line.
func (b *bench) agentReadyLine() string {
	f, err := os.Open(b.node.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if readyLineRE.MatchString(sc.Text()) && strings.Contains(sc.Text(), "startup") {
			return sc.Text()
		}
	}
	return ""
}

// ---- memory ----

type procMem struct {
	pid      int
	rss, pss int64 // KiB
	anon     int64 // KiB of anonymous memory (heap, stacks): RSS minus mapped files
}

type memSnapshot struct {
	role              string
	server            *procMem // with -agent: the server process, apart
	skiff, containerd procMem
	shims             []procMem
	others            []procMem // any other process of the node (not containers)
	shimsRSS, shimPSS int64
	shimAnon          int64
}

// readMem reads VmRSS (status) and Pss (smaps_rollup) of pid, in KiB.
func readMem(pid int) (procMem, bool) {
	m := procMem{pid: pid}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m, false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			m.rss = v
		case "Pss:":
			m.pss = v
		case "Anonymous:":
			m.anon = v
		}
	}
	return m, true
}

// memory finds the node's processes: the skiff process itself, and every
// process whose executable lies below the data dir (the embedded daemon
// runs as <data-dir>/…/bin/containerd, the shims as …/containerd-shim-runc-v2,
// hard links to the skiff binary).
func (b *bench) memory() memSnapshot {
	s := memSnapshot{role: "server+agent"}
	if b.agt != nil {
		s.role = "agent"
		m, _ := readMem(b.srv.cmd.Process.Pid)
		s.server = &m
	}
	pid0 := b.node.cmd.Process.Pid
	s.skiff, _ = readMem(pid0)
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == pid0 {
			continue
		}
		exe, err := os.Readlink(p + "/exe")
		if err != nil || !strings.HasPrefix(exe, b.node.dataDir+"/") {
			continue
		}
		m, ok := readMem(pid)
		if !ok {
			continue
		}
		switch filepath.Base(strings.TrimSuffix(exe, " (deleted)")) {
		case "containerd":
			s.containerd = m
		case "containerd-shim-runc-v2":
			s.shims = append(s.shims, m)
			s.shimsRSS += m.rss
			s.shimPSS += m.pss
			s.shimAnon += m.anon
		default:
			s.others = append(s.others, m)
		}
	}
	return s
}

// ---- CPU ----

// clkTck is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux).
const clkTck = 100

// cpuSnapshot is CPU time used so far: the machine's busy and total time
// (/proc/stat), and per process group of the node.
type cpuSnapshot struct {
	busy, total         float64 // seconds, all CPUs
	skiff, containerd   float64 // seconds
	shims               float64 // shims with their reaped children (runc)
	ctrs                float64 // the shims' live children: containers, incl. runc init before exec
	shimPids            map[int]float64
	skiffPid, daemonPid int
}

func procCPU(pid int, children bool) (float64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// fields after ") ": state(0) … utime(11) stime(12) cutime(13) cstime(14)
	if len(f) < 15 {
		return 0, false
	}
	var t float64
	idx := []int{11, 12}
	if children {
		idx = append(idx, 13, 14)
	}
	for _, i := range idx {
		v, _ := strconv.ParseFloat(f[i], 64)
		t += v
	}
	return t / clkTck, true
}

// serverCPU is the separate server process's CPU time (0 without -agent).
func (b *bench) serverCPU() float64 {
	if b.agt == nil {
		return 0
	}
	t, _ := procCPU(b.srv.cmd.Process.Pid, false)
	return t
}

func (b *bench) cpu() cpuSnapshot {
	c := cpuSnapshot{shimPids: map[int]float64{}}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseFloat(f, 64)
			c.total += v / clkTck
			if i != 3 && i != 4 { // idle, iowait
				c.busy += v / clkTck
			}
		}
	}
	c.skiffPid = b.node.cmd.Process.Pid
	c.skiff, _ = procCPU(c.skiffPid, false)
	for _, pid := range b.nodePids() {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if filepath.Base(exe) == "containerd-shim-runc-v2" {
			for _, child := range childPids(pid) {
				t, _ := procCPU(child, true)
				c.ctrs += t
			}
		}
		switch filepath.Base(exe) {
		case "containerd":
			c.daemonPid = pid
			c.containerd, _ = procCPU(pid, false)
		case "containerd-shim-runc-v2":
			if t, ok := procCPU(pid, true); ok {
				c.shimPids[pid] = t
				c.shims += t
			}
		}
	}
	return c
}

// childPids are the children of pid (/proc/<pid>/task/*/children).
func childPids(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// nodePids are the processes whose executable lies below the node's data
// dir (containerd and the shims), the skiff process itself excluded.
func (b *bench) nodePids() []int {
	var out []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == b.node.cmd.Process.Pid {
			continue
		}
		exe, err := os.Readlink(p + "/exe")
		if err == nil && strings.HasPrefix(exe, b.node.dataDir+"/") {
			out = append(out, pid)
		}
	}
	return out
}

// printCPU prints the CPU time used between two snapshots over wall time d.
// Shims new since a are counted from zero.
func printCPU(a, z cpuSnapshot, d time.Duration, ncpu int, srvBefore, srvAfter float64) {
	busy := z.busy - a.busy
	fmt.Printf("  cpu over %s: machine %.1f s busy of %.1f s (%.0f%% of %d cpus)\n", ms(d), busy, d.Seconds()*float64(ncpu), 100*busy/(d.Seconds()*float64(ncpu)), ncpu)
	shims := 0.0
	for pid, t := range z.shimPids {
		shims += t - a.shimPids[pid]
	}
	ctrs := z.ctrs - a.ctrs
	fmt.Printf("    skiff %.2f s, containerd %.2f s, shims+runc %.2f s (%d shims), containers %.2f s", z.skiff-a.skiff, z.containerd-a.containerd, shims, len(z.shimPids), ctrs)
	if srvAfter > 0 {
		fmt.Printf(", skiff server %.2f s", srvAfter-srvBefore)
	}
	fmt.Printf(", rest (kernel threads, other processes) %.2f s\n", busy-(z.skiff-a.skiff)-(z.containerd-a.containerd)-shims-ctrs-(srvAfter-srvBefore))
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func (s memSnapshot) print() {
	if s.server != nil {
		fmt.Printf("  (skiff server         pid %-7d RSS %10s  PSS %10s  anon %10s, not counted below)\n", s.server.pid, mib(s.server.rss), mib(s.server.pss), mib(s.server.anon))
	}
	fmt.Printf("  skiff %-15s pid %-7d RSS %10s  PSS %10s  anon %10s   (aim: agent < 50 MB)\n", "("+s.role+")", s.skiff.pid, mib(s.skiff.rss), mib(s.skiff.pss), mib(s.skiff.anon))
	fmt.Printf("  containerd            pid %-7d RSS %10s  PSS %10s  anon %10s\n", s.containerd.pid, mib(s.containerd.rss), mib(s.containerd.pss), mib(s.containerd.anon))
	per := ""
	if n := int64(len(s.shims)); n > 0 {
		per = fmt.Sprintf("   (each: RSS %.1f, PSS %.1f, anon %.1f MiB)", float64(s.shimsRSS)/1024/float64(n), float64(s.shimPSS)/1024/float64(n), float64(s.shimAnon)/1024/float64(n))
	}
	fmt.Printf("  shims: %-4d           sum RSS %10s  PSS %10s  anon %10s%s\n", len(s.shims), mib(s.shimsRSS), mib(s.shimPSS), mib(s.shimAnon), per)
	for _, o := range s.others {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", o.pid))
		fmt.Printf("  other pid %d %s RSS %s PSS %s\n", o.pid, filepath.Base(exe), mib(o.rss), mib(o.pss))
	}
	totalPSS := s.skiff.pss + s.containerd.pss + s.shimPSS
	fmt.Printf("  total PSS %s (RSS of skiff+containerd+shims double-counts the shared binary text)\n", mib(totalPSS))
}

// ---- phase 3–5: pods ----

func (b *bench) waitServiceAccount(ctx context.Context, cs *kubernetes.Clientset) error {
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no default service account: %w", err)
		}
		if err := b.sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func (b *bench) profile(ctx context.Context) error {
	cc, err := b.restConfig(time.Duration(b.o.profileSecs+30) * time.Second)
	if err != nil {
		return err
	}
	pc, err := kubernetes.NewForConfig(cc)
	if err != nil {
		return err
	}
	data, err := pc.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(b.o.profileSecs)).DoRaw(ctx)
	if err != nil {
		return err
	}
	return os.WriteFile(b.o.cpuProfile, data, 0o644)
}

func podSpec(name, run string) *v1.Pod {
	zero := int64(0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: run}},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers: []v1.Container{{
				Name:            "sleep",
				Image:           "busybox",
				ImagePullPolicy: v1.PullNever,
				Command:         []string{"sleep", "3600"},
			}},
		},
	}
}

type podTimes struct {
	created time.Time // the create call returned
	running time.Time // first watch event showing phase Running
}

func (b *bench) runPods(ctx context.Context) error {
	o := b.o
	ns := "default"
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	sel := benchLabel + "=" + run

	var mu sync.Mutex
	times := map[string]*podTimes{}
	var nRunning, nFailed atomic.Int64
	allRunning := make(chan struct{})
	var onceAll sync.Once
	get := func(name string) *podTimes {
		t := times[name]
		if t == nil {
			t = &podTimes{}
			times[name] = t
		}
		return t
	}
	observe := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		t := get(p.Name)
		switch p.Status.Phase {
		case v1.PodRunning:
			if t.running.IsZero() {
				t.running = now
				if nRunning.Add(1) == int64(o.n) {
					onceAll.Do(func() { close(allRunning) })
				}
			}
		case v1.PodFailed:
			nFailed.Add(1)
			logf("pod %s Failed: %s %s", p.Name, p.Status.Reason, p.Status.Message)
		}
	}
	var nLeft atomic.Int64
	allGone := make(chan struct{})
	var onceGone sync.Once
	deleting := atomic.Bool{}

	icc, err := b.restConfig(0)
	if err != nil {
		return err
	}
	ics, err := kubernetes.NewForConfig(icc)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(ics, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = sel }))
	inf := factory.Core().V1().Pods().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(any) {
			if deleting.Load() && nLeft.Add(-1) == 0 {
				onceGone.Do(func() { close(allGone) })
			}
		},
	})
	ictx, icancel := context.WithCancel(ctx)
	defer icancel()
	factory.Start(ictx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errors.New("pod informer did not sync")
	}

	clients := make([]*kubernetes.Clientset, o.clients)
	for i := range clients {
		if clients[i], err = b.client(60); err != nil {
			return err
		}
	}

	pace := "as fast as possible"
	if o.rate > 0 {
		pace = fmt.Sprintf("at %g/s", o.rate)
	}
	fmt.Printf("\n== pods: %d busybox `sleep 3600` (imagePullPolicy Never, grace 0), %d clients, %s\n", o.n, o.clients, pace)
	names := make(chan string, o.n)
	if o.rate > 0 {
		names = make(chan string)
		go func() {
			defer close(names)
			t := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
			defer t.Stop()
			for i := range o.n {
				select {
				case names <- fmt.Sprintf("pb-%s-%03d", run, i):
				case <-ctx.Done():
					return
				}
				if i < o.n-1 {
					select {
					case <-t.C:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	} else {
		for i := range o.n {
			names <- fmt.Sprintf("pb-%s-%03d", run, i)
		}
		close(names)
	}
	cpu0 := b.cpu()
	srv0 := b.serverCPU()
	start := time.Now()
	if o.goroutines != "" {
		go func() {
			if err := b.sleep(ctx, o.goroutinesAt); err != nil {
				return
			}
			data, err := clients[0].Discovery().RESTClient().Get().AbsPath("/debug/pprof/goroutine").Param("debug", "1").DoRaw(ctx)
			if err == nil {
				err = os.WriteFile(o.goroutines, data, 0o644)
			}
			if err != nil {
				logf("goroutines: %v", err)
			} else {
				logf("goroutines written to %s", o.goroutines)
			}
		}()
	}
	var createErr atomic.Value
	var wg sync.WaitGroup
	var createEnd atomic.Int64
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				if ctx.Err() != nil {
					return
				}
				_, err := c.CoreV1().Pods(ns).Create(ctx, podSpec(name, run), metav1.CreateOptions{})
				now := time.Now()
				if err != nil {
					createErr.CompareAndSwap(nil, fmt.Errorf("create %s: %w", name, err))
					return
				}
				mu.Lock()
				get(name).created = now
				mu.Unlock()
				createEnd.Store(now.UnixNano())
			}
		}()
	}
	wg.Wait()
	if e, _ := createErr.Load().(error); e != nil {
		return e
	}
	created := time.Unix(0, createEnd.Load()).Sub(start)
	logf("%d pods created in %v (%.0f/s)", o.n, ms(created), float64(o.n)/created.Seconds())

	// Wait for all Running, with progress every 5 s.
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-allRunning:
			break wait
		case <-ctx.Done():
			b.dumpPods(ics, ns, sel)
			return fmt.Errorf("%d/%d pods Running: %w", nRunning.Load(), o.n, context.Cause(ctx))
		case <-tick.C:
			if err := b.dead(); err != nil {
				return err
			}
			logf("%d/%d Running, %d Failed", nRunning.Load(), o.n, nFailed.Load())
		}
	}
	allAt := time.Now()
	cpu1 := b.cpu()
	srv1 := b.serverCPU()

	mu.Lock()
	var lat []time.Duration
	var lastRunning time.Time
	for _, t := range times {
		if t.created.IsZero() || t.running.IsZero() {
			continue
		}
		lat = append(lat, t.running.Sub(t.created))
		if t.running.After(lastRunning) {
			lastRunning = t.running
		}
	}
	mu.Unlock()
	slices.Sort(lat)
	total := lastRunning.Sub(start)
	fmt.Printf("  created          %d in %s (%.0f creates/s)\n", o.n, ms(created), float64(o.n)/created.Seconds())
	fmt.Printf("  all Running      %s after the first create (%.1f pods/s)\n", ms(total), float64(o.n)/total.Seconds())
	fmt.Printf("  create→Running   p50 %s  p90 %s  p99 %s  max %s  min %s   (aim: p99 < 1 s; upstream SLO 5 s)\n",
		ms(pct(lat, 50)), ms(pct(lat, 90)), ms(pct(lat, 99)), ms(lat[len(lat)-1]), ms(lat[0]))
	if f := nFailed.Load(); f > 0 {
		fmt.Printf("  failed events    %d\n", f)
	}

	printCPU(cpu0, cpu1, allAt.Sub(start), runtime.NumCPU(), srv0, srv1)

	// Phase 4: memory with the pods.
	fmt.Printf("\n== memory, %d pods Running (right away)\n", o.n)
	b.memory().print()
	if err := b.sleep(ctx, o.settle); err != nil {
		return err
	}
	fmt.Printf("\n== memory, %d pods Running (%v later)\n", o.n, o.settle+time.Since(allAt)-o.settle)
	b.memory().print()

	// Phase 5: delete.
	nLeft.Store(int64(len(inf.GetStore().List())))
	deleting.Store(true)
	if nLeft.Load() == 0 {
		onceGone.Do(func() { close(allGone) })
	}
	dstart := time.Now()
	dnames := make(chan string, o.n)
	for _, obj := range inf.GetStore().List() {
		dnames <- obj.(*v1.Pod).Name
	}
	close(dnames)
	var delErr atomic.Value
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range dnames {
				err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					delErr.CompareAndSwap(nil, fmt.Errorf("delete %s: %w", name, err))
				}
			}
		}()
	}
	wg.Wait()
	if e, _ := delErr.Load().(error); e != nil {
		return e
	}
	deleteCalls := time.Since(dstart)
	select {
	case <-allGone:
	case <-ctx.Done():
		return fmt.Errorf("%d pods not yet gone: %w", nLeft.Load(), context.Cause(ctx))
	}
	apiGone := time.Since(dstart)
	var shimsGone time.Duration
	for {
		if len(b.memory().shims) == 0 {
			shimsGone = time.Since(dstart)
			break
		}
		if time.Since(dstart) > 2*time.Minute {
			break
		}
		if err := b.sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	fmt.Printf("\n== delete %d pods\n", o.n)
	fmt.Printf("  delete calls     %s\n", ms(deleteCalls))
	fmt.Printf("  gone from API    %s after the first delete\n", ms(apiGone))
	if shimsGone > 0 {
		fmt.Printf("  no shim left     %s after the first delete\n", ms(shimsGone))
	} else {
		fmt.Printf("  shims left after 2 min: %d\n", len(b.memory().shims))
	}
	fmt.Printf("\n== memory, after deleting\n")
	b.memory().print()
	return nil
}

func (b *bench) dumpPods(cs *kubernetes.Clientset, ns, sel string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return
	}
	phases := map[string]int{}
	for _, p := range list.Items {
		phases[string(p.Status.Phase)]++
	}
	fmt.Printf("  pods by phase: %v\n", phases)
	for _, p := range list.Items {
		if p.Status.Phase != v1.PodRunning {
			fmt.Printf("  %s: %s %v\n", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			break
		}
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
