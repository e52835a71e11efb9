// Command crdload benchmarks custom resources against built-ins on a skiff
// (or any Kubernetes) API server, in one run, side by side:
//
//	CRD      time from the Create call of a CustomResourceDefinition (namespaced,
//	         structural schema with a default, one x-kubernetes-validations rule,
//	         status subresource) to its resource answering a LIST, to its
//	         group-version listing it in discovery, and to Established=True;
//	         each polled every -poll; -crd-reps CRDs of distinct groups
//	CREATE   -n custom objects with -clients concurrent clients (each its own
//	         connection), then -n ConfigMaps with the same payload
//	FILL     more creates up to -total objects of each kind
//	LIST     -total objects of each kind: full (rv="" and rv="0") and paginated
//	         (-limit per page), median of -lists runs
//	RSS      of the server (-pid) before and after the custom objects and after
//	         the ConfigMaps
//	DELETE   the CRD with its -total objects, until it is gone
//
// Both kinds go through the dynamic client (JSON), so the client's costs are
// alike. Timings are printed, never judged; unexpected outcomes (errors with
// the server's status, a schema not enforced, missing items) are printed with
// "!". -json writes every figure to a file.
//
//	go run ./e2e/bench/crdload -kubeconfig K -pid SERVER_PID [-n 2000] [-total 10000]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/e2e/bench/loadkit"
)

type config struct {
	kubeconfig    string
	pid           int
	clients       int
	n, total      int
	lists         int
	limit         int64
	crdReps       int
	poll          time.Duration
	crdTimeout    time.Duration
	deleteTimeout time.Duration
	reqTimeout    time.Duration
	timeout       time.Duration
	group         string
	nsPrefix      string
	keep          bool
	jsonOut       string
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig path")
	flag.IntVar(&c.pid, "pid", 0, "server process id, for its RSS (0: not measured)")
	flag.IntVar(&c.clients, "clients", 8, "concurrent clients in CREATE and FILL")
	flag.IntVar(&c.n, "n", 2000, "objects of each kind in the timed CREATE phase")
	flag.IntVar(&c.total, "total", 10000, "objects of each kind in all (FILL tops up to it); LIST and RSS are at this count")
	flag.IntVar(&c.lists, "lists", 3, "repetitions of each LIST (the median is reported)")
	flag.Int64Var(&c.limit, "limit", 500, "page size of the paginated LIST")
	flag.IntVar(&c.crdReps, "crd-reps", 3, "CRDs created for the CRD timing (distinct groups; the first is used for the load)")
	flag.DurationVar(&c.poll, "poll", 10*time.Millisecond, "poll interval of the CRD timing")
	flag.DurationVar(&c.crdTimeout, "crd-timeout", 60*time.Second, "bound on a CRD becoming served")
	flag.DurationVar(&c.deleteTimeout, "delete-timeout", 3*time.Minute, "bound on the CRD's deletion (0 skips it)")
	flag.DurationVar(&c.reqTimeout, "request-timeout", 60*time.Second, "timeout of each request")
	flag.DurationVar(&c.timeout, "timeout", 14*time.Minute, "give up after this long")
	flag.StringVar(&c.group, "group", "bench.skiff.dev", "API group of the CRD")
	flag.StringVar(&c.nsPrefix, "ns", "crdload", "namespace prefix")
	flag.BoolVar(&c.keep, "keep", false, "leave the CRD, objects and namespaces in place")
	flag.StringVar(&c.jsonOut, "json", "", "write results as JSON to this file")
	flag.Parse()
	c.total = max(c.total, c.n)
	return c
}

type kindReport struct {
	Kind        string           `json:"kind"`
	ObjectBytes int              `json:"stored_object_json_bytes"`
	Create      loadkit.LatStats `json:"create"`
	Fill        loadkit.LatStats `json:"fill"`
	List        []listStats      `json:"list"`
	RSSDeltaMiB float64          `json:"rss_delta_mib"`
}

type report struct {
	Server       string              `json:"server"`
	Version      string              `json:"server_version"`
	Clients      int                 `json:"clients"`
	N            int                 `json:"n"`
	Total        int                 `json:"total"`
	CRD          []crdTiming         `json:"crd"`
	Custom       kindReport          `json:"custom"`
	ConfigMaps   kindReport          `json:"configmaps"`
	RSS          []loadkit.RSSSample `json:"rss"`
	CRDDeleteMs  float64             `json:"crd_delete_ms,omitempty"`
	Wire         map[string]int64    `json:"wire"`
	Problems     []string            `json:"problems,omitempty"`
	Interrupted  string              `json:"interrupted,omitempty"`
	elapsedStart time.Time
}

func main() {
	c := parseFlags()
	rep, err := run(c)
	if rep != nil {
		printReport(c, rep)
		if c.jsonOut != "" {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(c.jsonOut, append(b, '\n'), 0o644); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdload:", err)
		os.Exit(1)
	}
}

func run(c config) (*report, error) {
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
	rep := &report{Server: rc.Host, Clients: c.clients, N: c.n, Total: c.total, elapsedStart: time.Now()}
	defer func() {
		rep.Wire = w.Snapshot()
		rep.Problems = pr.List()
	}()
	admin, err := newDynamic(rc, c.reqTimeout, w)
	if err != nil {
		return rep, err
	}
	hc, err := newHTTP(rc, c.reqTimeout, w)
	if err != nil {
		return rep, err
	}
	if code, b, err := getStatus(ctx, hc, rc.Host, "/version"); err == nil && code == 200 {
		var v struct{ GitVersion string }
		_ = json.Unmarshal(b, &v)
		rep.Version = v.GitVersion
	}
	fmt.Printf("crdload server=%s version=%s clients=%d n=%d total=%d poll=%s\n", rep.Server, rep.Version, c.clients, c.n, c.total, c.poll)
	rss := func(label string) {
		s, err := loadkit.SampleRSS(c.pid, label)
		if err != nil {
			if c.pid != 0 {
				pr.Add("rss %s: %v", label, err)
			}
			return
		}
		rep.RSS = append(rep.RSS, s)
		fmt.Printf("RSS    %-32s %7.1f MiB (peak %.1f MiB) cpu=%s\n", label, s.RSSMiB, s.HWMMiB, s.CPU)
	}
	rss("before the CRDs")

	if err := crdPhase(ctx, c, admin, hc, rc.Host, rep, pr); err != nil {
		return rep, err
	}
	cr := widgetKind(c.group, c.nsPrefix+"-widgets")
	cm := configMapKind(c.nsPrefix + "-configmaps")
	for _, k := range []kind{cr, cm} {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": k.ns}}}
		if _, err := admin.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return rep, fmt.Errorf("create namespace %s: %s", k.ns, loadkit.Describe(err))
		}
	}
	checkSemantics(ctx, admin, cr, pr)
	if !c.keep {
		defer cleanup(c, admin, cr, cm, rep, pr)
	}

	clients, err := warmClients(ctx, c, rc, w, cr.ns)
	if err != nil {
		return rep, err
	}
	rss("before the objects")
	before := len(rep.RSS) - 1
	rep.Custom = loadKind(ctx, c, clients, admin, cr, pr)
	rss(fmt.Sprintf("after %d %s", c.total, cr.label))
	rep.ConfigMaps = loadKind(ctx, c, clients, admin, cm, pr)
	rss(fmt.Sprintf("after %d %s too", c.total, cm.label))
	if c.pid != 0 && before >= 0 && len(rep.RSS) == before+3 {
		rep.Custom.RSSDeltaMiB = rep.RSS[before+1].RSSMiB - rep.RSS[before].RSSMiB
		rep.ConfigMaps.RSSDeltaMiB = rep.RSS[before+2].RSSMiB - rep.RSS[before+1].RSSMiB
	}
	if ctx.Err() == nil {
		rep.Custom.List = listPhase(ctx, hc, rc.Host, cr, c.total, c.lists, c.limit, pr)
		rep.ConfigMaps.List = listPhase(ctx, hc, rc.Host, cm, c.total, c.lists, c.limit, pr)
		rss("after the LISTs")
	}
	if err := ctx.Err(); err != nil {
		rep.Interrupted = err.Error()
		return rep, err
	}
	return rep, nil
}

// crdPhase times c.crdReps CRDs; the first, of c.group, stays for the load.
func crdPhase(ctx context.Context, c config, admin dynamic.Interface, hc *http.Client, host string, rep *report, pr *loadkit.Problems) error {
	for i := range max(1, c.crdReps) {
		group := c.group
		if i > 0 {
			group = fmt.Sprintf("r%d.%s", i, c.group)
		}
		t, err := timeCRD(ctx, admin, hc, host, group, c.poll, c.crdTimeout)
		rep.CRD = append(rep.CRD, t)
		fmt.Printf("CRD    %-28s create call %5.1fms -> LIST ok %6.1fms (%d polls, first code %d) -> discovery %6.1fms -> Established %6.1fms\n",
			t.CRD, t.CreateMs, t.ListMs, t.ListPolls, t.FirstListCode, t.DiscoveryMs, t.EstablishedMs)
		if t.NotServedAfterEstablished > 0 {
			pr.Add("CRD %s: %d LIST polls sent after it was seen Established=True still failed (upstream serves from NamesAccepted on)",
				t.CRD, t.NotServedAfterEstablished)
		}
		if err != nil {
			if i == 0 {
				return fmt.Errorf("CRD %s: %w", t.CRD, err)
			}
			pr.Add("CRD %s: %v", t.CRD, err)
		}
		if i > 0 {
			// The extra CRDs only serve the timing; they go at once.
			if err := admin.Resource(crdGVR).Delete(ctx, t.CRD, metav1.DeleteOptions{}); err != nil {
				pr.Add("delete CRD %s: %s", t.CRD, loadkit.Describe(err))
			}
		}
	}
	return nil
}

// warmClients makes c.clients dynamic clients, each with its own
// connection, and does one request on each so the TLS handshakes fall
// outside the timed phases.
func warmClients(ctx context.Context, c config, rc *rest.Config, w *loadkit.Wire, ns string) ([]dynamic.Interface, error) {
	out := make([]dynamic.Interface, max(1, c.clients))
	for i := range out {
		d, err := newDynamic(rc, c.reqTimeout, w)
		if err != nil {
			return nil, err
		}
		if _, err := d.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, ns, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("warm client %d: %s", i, loadkit.Describe(err))
		}
		out[i] = d
	}
	return out, nil
}

// loadKind creates c.n objects of k (timed), then tops up to c.total.
func loadKind(ctx context.Context, c config, clients []dynamic.Interface, admin dynamic.Interface, k kind, pr *loadkit.Problems) kindReport {
	kr := kindReport{Kind: k.label}
	kr.Create = createPhase(ctx, k, clients, 0, c.n, pr)
	printLat("CREATE", k.label, c.clients, kr.Create)
	if c.total > c.n && ctx.Err() == nil {
		kr.Fill = createPhase(ctx, k, clients, c.n, c.total, pr)
		printLat("FILL", k.label, c.clients, kr.Fill)
	}
	if b, err := storedSize(ctx, admin, k, objName(0)); err != nil {
		pr.Add("get %s %s: %s", k.label, objName(0), loadkit.Describe(err))
	} else {
		kr.ObjectBytes = b
	}
	return kr
}

func printLat(phase, label string, c int, s loadkit.LatStats) {
	fmt.Printf("%-6s %-10s c=%-2d n=%-6d err=%-3d wall=%7.2fs rate=%7.1f/s p50=%7.2fms p99=%7.2fms max=%7.2fms\n",
		phase, label, c, s.Count, s.Errors, s.WallS, s.PerSec, s.P50ms, s.P99ms, s.MaxMs)
}

// cleanup deletes the CRD, timing how long the server takes to remove it
// with all its objects, and the namespaces (without waiting for them).
func cleanup(c config, admin dynamic.Interface, cr, cm kind, rep *report, pr *loadkit.Problems) {
	ctx, cancel := context.WithTimeout(context.Background(), c.deleteTimeout+30*time.Second)
	defer cancel()
	if c.deleteTimeout > 0 {
		d, err := deleteCRD(ctx, admin, crdPlural+"."+c.group, c.deleteTimeout)
		if err != nil {
			pr.Add("%v", err)
		} else {
			rep.CRDDeleteMs = loadkit.Ms(d)
		}
		fmt.Printf("DELETE CRD %s with its objects: gone after %.1fms\n", crdPlural+"."+c.group, loadkit.Ms(d))
	}
	for _, k := range []kind{cr, cm} {
		if err := admin.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(ctx, k.ns, metav1.DeleteOptions{}); err != nil {
			pr.Add("delete namespace %s: %s", k.ns, loadkit.Describe(err))
		}
	}
}

func printReport(c config, rep *report) {
	cr, cm := rep.Custom, rep.ConfigMaps
	fmt.Println()
	fmt.Printf("== summary (clients=%d, n=%d, total=%d, %.0fs in all)\n", c.clients, c.n, c.total, time.Since(rep.elapsedStart).Seconds())
	var list, disco, est []time.Duration
	for _, t := range rep.CRD {
		list = append(list, time.Duration(t.ListMs*float64(time.Millisecond)))
		disco = append(disco, time.Duration(t.DiscoveryMs*float64(time.Millisecond)))
		est = append(est, time.Duration(t.EstablishedMs*float64(time.Millisecond)))
	}
	fmt.Printf("CRD create -> LIST ok / discovery / Established, median of %d: %.1f / %.1f / %.1f ms\n",
		len(rep.CRD), loadkit.Ms(loadkit.Median(list)), loadkit.Ms(loadkit.Median(disco)), loadkit.Ms(loadkit.Median(est)))
	row := func(name, a, b string) { fmt.Printf("%-36s %18s %18s\n", name, a, b) }
	row("", cr.Kind+" (CRD)", cm.Kind)
	row("stored object, JSON bytes", fmt.Sprint(cr.ObjectBytes), fmt.Sprint(cm.ObjectBytes))
	lat := func(label string, a, b loadkit.LatStats) {
		row(label+" rate/s", fmt.Sprintf("%.1f", a.PerSec), fmt.Sprintf("%.1f", b.PerSec))
		row(label+" p50 / p99 ms", fmt.Sprintf("%.2f / %.2f", a.P50ms, a.P99ms), fmt.Sprintf("%.2f / %.2f", b.P50ms, b.P99ms))
		row(label+" errors", fmt.Sprint(a.Errors), fmt.Sprint(b.Errors))
	}
	lat(fmt.Sprintf("CREATE n=%d", cr.Create.Count), cr.Create, cm.Create)
	if cr.Fill.Count > 0 || cm.Fill.Count > 0 {
		lat(fmt.Sprintf("FILL n=%d", cr.Fill.Count), cr.Fill, cm.Fill)
	}
	for i := range max(len(cr.List), len(cm.List)) {
		get := func(ls []listStats) (string, string) {
			if i >= len(ls) || len(ls[i].RunsMs) == 0 {
				return "-", "-"
			}
			return fmt.Sprintf("%.1f", ls[i].MedianMs), fmt.Sprintf("%d items, %d pages, %.1f MB", ls[i].Items, ls[i].Pages, float64(ls[i].Bytes)/1e6)
		}
		mode := ""
		if i < len(cr.List) {
			mode = cr.List[i].Mode
		} else {
			mode = cm.List[i].Mode
		}
		a, ad := get(cr.List)
		b, bd := get(cm.List)
		row("LIST "+mode+" median ms", a, b)
		row("  ", ad, bd)
	}
	if c.pid != 0 {
		row(fmt.Sprintf("RSS growth for %d objects, MiB", c.total), fmt.Sprintf("%+.1f", cr.RSSDeltaMiB), fmt.Sprintf("%+.1f", cm.RSSDeltaMiB))
	}
	if rep.CRDDeleteMs > 0 {
		fmt.Printf("CRD delete with %d objects -> gone: %.1f ms\n", c.total, rep.CRDDeleteMs)
	}
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(rep.Wire)) {
		keys = append(keys, fmt.Sprintf("%s=%d", k, rep.Wire[k]))
	}
	fmt.Printf("wire: %s\n", strings.Join(keys, "  "))
	if len(rep.Problems) > 0 {
		fmt.Printf("problems: %d (see the lines with ! above / -json)\n", len(rep.Problems))
	}
}
