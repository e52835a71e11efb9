// Command admload times ConfigMap creates on a skiff (or any Kubernetes)
// API server under admission configurations, in one run:
//
//	none        no webhook, no policy (the baseline)
//	validating  one validating webhook that allows everything
//	mut+val     one mutating webhook (adds a label with a JSONPatch) and
//	            the validating one
//	vap         one ValidatingAdmissionPolicy and binding
//	            (object.data.size() < 100)
//	quota       a ResourceQuota on count/configmaps in the namespace, far
//	            above what is created; against none it is the quota
//	            admission's cost per create
//
// The webhooks are served by this process, over HTTPS on 127.0.0.1 with a
// CA of its own, registered by clientConfig.url and caBundle; they fail
// closed. Each round runs every setup once, in a fresh namespace, in an
// order rotated from round to round, since the machine is shared and
// noisy; the summary is the median of the rounds. Before a setup is timed
// it is shown to be in force (the label appears, the webhooks are called,
// the policy refuses a ConfigMap of 100 keys, the quota refuses one over
// it) and nothing else is; after, that each webhook was called once per
// timed create. Timings are printed, never judged; unexpected outcomes
// are printed with "!".
//
//	go run ./e2e/bench/admload -kubeconfig K [-clients 8] [-n 2000] [-rounds 3]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/e2e/bench/loadkit"
)

type config struct {
	kubeconfig string
	clients    int
	n          int
	warmup     int
	rounds     int
	only       string
	quotaHard  int64
	settle     time.Duration
	poll       time.Duration
	verifyFor  time.Duration
	reqTimeout time.Duration
	timeout    time.Duration
	nsPrefix   string
	jsonOut    string
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig path")
	flag.IntVar(&c.clients, "clients", 8, "concurrent clients, each its own connection")
	flag.IntVar(&c.n, "n", 2000, "ConfigMaps created per setup and round")
	flag.IntVar(&c.warmup, "warmup", 500, "untimed creates with no webhook before the rounds, to warm the server (0: none)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every setup once (the summary is their median)")
	flag.StringVar(&c.only, "setups", "", "comma-separated setups to run (default all: none,validating,mut+val,vap,quota)")
	flag.Int64Var(&c.quotaHard, "quota-hard", 1_000_000, "the quota's count/configmaps during the timed creates")
	flag.DurationVar(&c.settle, "settle", 2*time.Second, "pause before each timed phase, after the setup is verified")
	flag.DurationVar(&c.poll, "poll", 100*time.Millisecond, "interval of the in-force probes")
	flag.DurationVar(&c.verifyFor, "verify-timeout", 60*time.Second, "bound on a setup coming into force")
	flag.DurationVar(&c.reqTimeout, "request-timeout", 60*time.Second, "timeout of each request")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.StringVar(&c.nsPrefix, "ns", "admload", "namespace prefix")
	flag.StringVar(&c.jsonOut, "json", "", "write results as JSON to this file")
	flag.Parse()
	return c
}

// measurement is one setup timed once.
type measurement struct {
	Round           int              `json:"round"`
	Setup           string           `json:"setup"`
	Namespace       string           `json:"namespace"`
	InForceProbes   int              `json:"in_force_probes"`
	InForceMs       float64          `json:"in_force_ms"`
	Create          loadkit.LatStats `json:"create"`
	MutatingCalls   int64            `json:"mutating_webhook_calls"`
	ValidatingCalls int64            `json:"validating_webhook_calls"`
	LoadBefore      string           `json:"load_before"`
	LoadAfter       string           `json:"load_after"`
	Skipped         string           `json:"skipped,omitempty"`
}

type report struct {
	Server       string           `json:"server"`
	Version      string           `json:"server_version"`
	Clients      int              `json:"clients"`
	N            int              `json:"n"`
	Rounds       int              `json:"rounds"`
	Setups       []setup          `json:"setups"`
	Warmup       *measurement     `json:"warmup,omitempty"`
	Measurements []measurement    `json:"measurements"`
	LoadStart    string           `json:"load_start"`
	LoadEnd      string           `json:"load_end"`
	Wire         map[string]int64 `json:"wire"`
	Problems     []string         `json:"problems,omitempty"`
	Interrupted  string           `json:"interrupted,omitempty"`
	started      time.Time
}

func main() {
	c := parseFlags()
	rep, err := run(c)
	if rep != nil {
		printSummary(os.Stdout, rep, time.Since(rep.started))
		if c.jsonOut != "" {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(c.jsonOut, append(b, '\n'), 0o644); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "admload:", err)
		os.Exit(1)
	}
}

func chooseSetups(only string) ([]setup, error) {
	all := allSetups()
	if only == "" {
		return all, nil
	}
	var out []setup
	for _, k := range strings.Split(only, ",") {
		k = strings.TrimSpace(k)
		found := false
		for _, s := range all {
			if s.Key == k {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-setups: unknown setup %q", k)
		}
	}
	return out, nil
}

// bench is what every measurement uses.
type bench struct {
	c       config
	admin   kubernetes.Interface
	clients []kubernetes.Interface
	hook    *hookServer
	check   *checker
	pr      *loadkit.Problems
}

func run(c config) (*report, error) {
	setups, err := chooseSetups(c.only)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	w := loadkit.NewWire()
	pr := &loadkit.Problems{}
	rep := &report{Server: rc.Host, Clients: c.clients, N: c.n, Rounds: c.rounds, Setups: setups, LoadStart: loadkit.LoadAvg(), started: time.Now()}
	defer func() {
		rep.LoadEnd = loadkit.LoadAvg()
		rep.Wire = w.Snapshot()
		rep.Problems = pr.List()
	}()
	b, err := newBench(c, loadkit.Clients{Base: rc, Wire: w}, pr)
	if err != nil {
		return rep, err
	}
	defer b.close()
	if v, err := b.admin.Discovery().ServerVersion(); err == nil {
		rep.Version = v.GitVersion
	}
	fmt.Printf("admload server=%s version=%s clients=%d n=%d rounds=%d webhook=%s load=%s\n",
		rep.Server, rep.Version, c.clients, c.n, c.rounds, b.hook.URL, rep.LoadStart)
	fmt.Printf("  webhooks fail closed, ConfigMap CREATE only; policy %q; quota %s=%d; ConfigMaps of 2 keys, 196 B of data\n",
		policyRule, quotaResource, c.quotaHard)
	// Whatever a setup leaves behind goes, even when interrupted.
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		if err := removeCluster(dctx, b.admin); err != nil {
			pr.Add("cleanup: %s", loadkit.Describe(err))
		}
	}()
	if c.warmup > 0 {
		// Round 0: the first creates on a fresh server are slower (caches,
		// connections, the runtime's heap growing); no setup should pay it.
		m := b.measure(ctx, setup{Key: "warmup", Title: "warm-up, no webhook"}, 0, c.warmup)
		rep.Warmup = &m
	}
	for r := range max(1, c.rounds) {
		for i := range setups {
			s := setups[(i+r)%len(setups)]
			m := b.measure(ctx, s, r+1, c.n)
			rep.Measurements = append(rep.Measurements, m)
			if err := ctx.Err(); err != nil {
				rep.Interrupted = err.Error()
				return rep, err
			}
		}
	}
	return rep, nil
}

// newBench makes the admin client, c.clients load clients (each its own
// connection) and starts the webhook server.
func newBench(c config, kit loadkit.Clients, pr *loadkit.Problems) (*bench, error) {
	admin, err := kubernetes.NewForConfig(kit.Config(c.reqTimeout))
	if err != nil {
		return nil, err
	}
	b := &bench{c: c, admin: admin, pr: pr}
	for range max(1, c.clients) {
		cl, err := kubernetes.NewForConfig(kit.Config(c.reqTimeout))
		if err != nil {
			return nil, err
		}
		b.clients = append(b.clients, cl)
	}
	if b.hook, err = startHookServer(); err != nil {
		return nil, err
	}
	b.check = &checker{admin: admin, hook: b.hook, poll: c.poll, timeout: c.verifyFor, quotaHard: c.quotaHard}
	return b, nil
}

// close stops the webhook server.
func (b *bench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.hook.Close(ctx); err != nil {
		b.pr.Add("webhook server: %v", err)
	}
}

func nsName(prefix string, s setup, round int) string {
	return fmt.Sprintf("%s-%s-r%d", prefix, strings.NewReplacer("+", "-").Replace(s.Key), round)
}

// measure sets s up in a fresh namespace, shows it is in force, times
// n creates, checks it stayed in force and takes it all down again. A
// setup that cannot be shown in force is not timed.
func (b *bench) measure(ctx context.Context, s setup, round, n int) measurement {
	m := measurement{Round: round, Setup: s.Key, Namespace: nsName(b.c.nsPrefix, s, round)}
	defer b.teardown(m.Namespace)
	skip := func(err error) measurement {
		m.Skipped = loadkit.Describe(err)
		b.pr.Add("%s round %d: not timed: %s", s.Key, round, m.Skipped)
		return m
	}
	if err := b.prepare(ctx, s, &m); err != nil {
		return skip(err)
	}
	for i, cl := range b.clients {
		// The TLS handshakes fall outside the timed region (once: the
		// connections are kept from one measurement to the next).
		if _, err := cl.CoreV1().Namespaces().Get(ctx, m.Namespace, metav1.GetOptions{}); err != nil {
			return skip(fmt.Errorf("warm client %d: %w", i, err))
		}
	}
	if err := sleep(ctx, b.c.settle); err != nil {
		return skip(err)
	}
	m0, v0 := b.hook.Calls(mutatePath, m.Namespace), b.hook.Calls(validatePath, m.Namespace)
	m.LoadBefore = loadkit.LoadAvg()
	m.Create = loadkit.Run(ctx, len(b.clients), 0, n, func(ctx context.Context, w, i int) error {
		name := fmt.Sprintf("obj-%06d", i)
		if _, err := b.clients[w].CoreV1().ConfigMaps(m.Namespace).Create(ctx, smallConfigMap(name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("%s round %d: create %s: %w", s.Key, round, name, err)
		}
		return nil
	}, b.pr.Add)
	m.LoadAfter = loadkit.LoadAvg()
	m.MutatingCalls = b.hook.Calls(mutatePath, m.Namespace) - m0
	m.ValidatingCalls = b.hook.Calls(validatePath, m.Namespace) - v0
	st := m.Create
	fmt.Printf("round %d %-10s n=%-5d err=%-3d wall=%6.2fs rate=%7.1f/s p50=%7.2fms p99=%7.2fms max=%7.2fms  hooks m/v=%d/%d  in force after %d probes (%.0fms)  load %s -> %s\n",
		round, s.Key, st.Count, st.Errors, st.WallS, st.PerSec, st.P50ms, st.P99ms, st.MaxMs,
		m.MutatingCalls, m.ValidatingCalls, m.InForceProbes, m.InForceMs, m.LoadBefore, m.LoadAfter)
	if ctx.Err() == nil {
		b.check.afterTimed(ctx, s, m.Namespace, &m, b.pr)
	}
	return m
}

// prepare makes the namespace and s's objects and shows s in force.
func (b *bench) prepare(ctx context.Context, s setup, m *measurement) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.Namespace}}
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	// The root CA ConfigMap is published into a new namespace by a
	// controller; once it is there, that create is not in the timed ones.
	err := b.check.until(ctx, "kube-root-ca.crt in "+m.Namespace, func(ctx context.Context) (bool, string, error) {
		_, err := b.admin.CoreV1().ConfigMaps(m.Namespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, "not there", err
	})
	if err != nil {
		return err
	}
	if err := applyCluster(ctx, b.admin, b.hook, s); err != nil {
		return err
	}
	probes, took, err := b.check.inForce(ctx, s, m.Namespace)
	m.InForceProbes, m.InForceMs = probes, loadkit.Ms(took)
	if err != nil {
		return err
	}
	if s.Quota {
		return b.check.armQuota(ctx, m.Namespace)
	}
	return b.check.noQuota(ctx, m.Namespace)
}

// teardown removes the setup's cluster objects and the namespace with its
// ConfigMaps (deleted first and waited for, so the next setup is not
// timed against their deletion).
func (b *bench) teardown(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := removeCluster(ctx, b.admin); err != nil {
		b.pr.Add("teardown: %s", loadkit.Describe(err))
	}
	if err := b.admin.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.pr.Add("teardown: deletecollection configmaps in %s: %s", ns, loadkit.Describe(err))
	}
	if err := b.admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		b.pr.Add("teardown: delete namespace %s: %s", ns, loadkit.Describe(err))
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
