// Command proxybench measures Services on nftables (skiff/netproxy) and the
// cluster DNS (skiff/netproxy/clusterdns) at the seed's scale: -services
// ClusterIP Services with -endpoints endpoints each.
//
// It never touches the machine's own network namespace. It makes two
// namespaces (skiffbench-node-<pid>, skiffbench-pod-<pid>): the "node" has
// a bridge with 10.244.0.1/24, ip_forward=1 and a default route through the
// bridge (so a connection to a virtual IP has a route for the output-hook
// DNAT); the "pod" sits behind a veth on that bridge with 10.244.0.2/24 and
// runs a TCP echo server on :8080. The proxier manages the node namespace
// (Config.NetNS) and reads a fake clientset. Namespaces left by a crashed
// run (whose pid is gone) are removed at start; ours are removed at exit,
// also on SIGINT/SIGTERM and on errors.
//
// Phases and figures:
//
//  1. full sync: all Services and EndpointSlices exist before the proxier
//     starts; its first (cold) full sync, and a second one by a restarted
//     proxier over the populated table (the periodic repair's rewrite);
//     their Duration, wall time from Run, and the process's user and system
//     CPU meanwhile (system time is the kernel's nftables commit); chain,
//     rule and element counts, cross-checked with `nft -j list ruleset`
//     read inside the node namespace.
//  2. one change: -changes updates of one Service's EndpointSlice (drop one
//     endpoint, add it back): the sync's own Duration, the wall time from
//     the update call to the AfterSync callback, and the CPU meanwhile.
//  3. connections: -conns sequential connect + 1-byte echo + close from the
//     node namespace to the target Service 10.96.0.10:80 (→ the pod's
//     :8080), with 1 Service present and with all present, -rounds rounds
//     each in alternating order, and straight to the pod address (no
//     Service) as the floor. The client closes with a reset (SO_LINGER 0),
//     so no TIME_WAIT piles up across rounds.
//  4. DNS: clusterdns serves 10.43.0.10:53 (on a dummy link in the node
//     namespace) with all Services; a client in the pod namespace sends
//     -dns-queries sequential A queries for random svc-<i>.default.svc.
//     cluster.local over UDP, one socket per query as a pod's resolver does.
//
// The figures are printed with the aims beside them; a missed aim
// never fails the run, only a failed setup or measurement does.
//
//	go run ./e2e/bench/proxybench [-services 5000] [-endpoints 10] [-conns 20000] [-changes 50] [-dns-queries 20000]
//
// It must run as root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

type options struct {
	services, endpoints int
	conns, changes      int
	dnsQueries          int
	rounds              int
	timeout             time.Duration
	logLevel            string
	skipDNS             bool
}

func main() {
	var o options
	flag.IntVar(&o.services, "services", 5000, "ClusterIP Services (the target plus services-1 others)")
	flag.IntVar(&o.endpoints, "endpoints", 10, "endpoints of each other Service (one EndpointSlice each)")
	flag.IntVar(&o.conns, "conns", 20000, "connections per latency measurement")
	flag.IntVar(&o.changes, "changes", 50, "single-Service changes to time (alternately drop and re-add one endpoint)")
	flag.IntVar(&o.dnsQueries, "dns-queries", 20000, "DNS A queries from the pod namespace")
	flag.IntVar(&o.rounds, "rounds", 3, "latency rounds with 1 and with -services Services, alternating")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up (and clean up) after this long")
	flag.StringVar(&o.logLevel, "log-level", "warn", "level of the proxier's and DNS server's logs on stderr (debug, info, warn, error)")
	flag.BoolVar(&o.skipDNS, "skip-dns", false, "skip the DNS phase")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "proxybench must run as root (network namespaces, nftables)")
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	b := &bench{o: o, log: newLogger(o.logLevel), res: newResults(o)}
	err := func() error {
		defer b.cleanup() // also when run panics
		return b.run(ctx)
	}()
	b.res.print()
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "proxybench: stopped:", context.Cause(ctx))
		}
		os.Exit(1)
	}
}

func (o options) validate() error {
	switch {
	case o.services < 1 || o.services > 60000:
		return errors.New("-services: want 1..60000")
	case o.endpoints < 1 || o.endpoints > 1000:
		return errors.New("-endpoints: want 1..1000")
	case o.services*o.endpoints > 500000:
		return errors.New("-services × -endpoints: want at most 500,000 (the made-up pod range)")
	case o.conns < 1 || o.conns > 1000000, o.changes < 0 || o.changes > 10000,
		o.dnsQueries < 0 || o.dnsQueries > 1000000, o.rounds < 1 || o.rounds > 20:
		return errors.New("-conns, -changes, -dns-queries or -rounds out of range")
	}
	return nil
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// bench is one run: the namespaces, the fake cluster, the proxier in
// service and the figures gathered so far.
type bench struct {
	o   options
	log *slog.Logger
	lab *lab
	cl  *cluster
	px  *proxyInstance
	res *results
}

func (b *bench) run(ctx context.Context) error {
	o := b.o
	fmt.Printf("proxybench: %d Services × %d endpoints, %d conns/measurement, %d changes, %d DNS queries; %d cpus, %s\n",
		o.services, o.endpoints, o.conns, o.changes, o.dnsQueries, runtime.NumCPU(), runtime.Version())
	removeStaleNamespaces()
	var err error
	if b.lab, err = newLab(); err != nil {
		return fmt.Errorf("setup namespaces: %w", err)
	}
	logf("namespaces %s (node) and %s (pod) ready", b.lab.nodeName, b.lab.podName)
	if err := b.lab.startEcho(ctx); err != nil {
		return fmt.Errorf("echo server: %w", err)
	}
	b.cl = newCluster(o.services, o.endpoints)
	if err := b.syncPhase(ctx); err != nil {
		return fmt.Errorf("full sync: %w", err)
	}
	if err := b.changePhase(ctx); err != nil {
		return fmt.Errorf("one change: %w", err)
	}
	if err := b.latencyPhase(ctx); err != nil {
		return fmt.Errorf("connection latency: %w", err)
	}
	if o.skipDNS || o.dnsQueries == 0 {
		return nil
	}
	if err := b.dnsPhase(ctx); err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	return nil
}

// cleanup stops what run started and removes the namespaces; it logs
// instead of failing.
func (b *bench) cleanup() {
	if b.px != nil {
		b.px.stop()
		b.px = nil
	}
	if b.lab != nil {
		b.lab.close()
	}
}
