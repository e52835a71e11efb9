// Command apiload is a control-plane datapath load generator for skiff (or any
// Kubernetes API server), built on client-go.
//
// For each client count in -clients it makes a fresh namespace and runs:
//
//	CREATE  -n objects with C concurrent clients (each its own TCP/TLS connection)
//	GET     random existing objects, -gets in total or each client for -get-for
//	LIST    all objects with resourceVersion "" (consistent read) and "0" (any
//	        revision, e.g. a cache), and a paginated consistent list (-limit per page);
//	        median of -lists runs each
//	WATCH   -watch creates one at a time with a watch open; latency is the
//	        event's arrival minus the start of the Create call
//	DELETE  deletecollection of the namespace's objects, then a LIST to check
//	        that none remain; the namespace itself is deleted without waiting
//
// Client-side rate limits are off. One line per phase is printed, then a
// "wire" line counting request/response media types and status codes (to
// show which encoding the server really used); -json writes every figure to
// a file. Unexpected outcomes (errors with the server's status, missing
// items, ignored limits, stray watch events) are printed with "!".
//
//	go run ./e2e/bench/apiload -kubeconfig K -clients 8,64 -n 2000 -watch 200 [-proto] [-objects pod]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"skiff/e2e/bench/loadkit"
)

var (
	kubeconfig  = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig path")
	clientsFlag = flag.String("clients", "8,64", "comma-separated concurrent client counts; one round each")
	n           = flag.Int("n", 2000, "objects to create in the CREATE phase")
	watchN      = flag.Int("watch", 200, "creates in the WATCH phase (0 skips it)")
	proto       = flag.Bool("proto", false, "send and accept protobuf instead of JSON")
	objects     = flag.String("objects", "configmap", "object kind: configmap (~200 B data) or pod (~1.5 KiB)")
	jsonOut     = flag.String("json", "", "write results as JSON to this file")
	gets        = flag.Int("gets", 0, "GETs in total across clients (0: same as -n)")
	getFor      = flag.Duration("get-for", 0, "if set, each client GETs for this long instead of -gets")
	lists       = flag.Int("lists", 3, "repetitions of each LIST (the median is reported)")
	limit       = flag.Int64("limit", 500, "page size of the paginated LIST")
	phasesFlag  = flag.String("phases", "create,get,list,watch,delete", "phases to run, comma-separated")
	nsPrefix    = flag.String("ns", "apiload", "namespace prefix (a unique suffix is appended)")
	keep        = flag.Bool("keep", false, "leave the objects and namespace in place at the end")
	timeout     = flag.Duration("timeout", 30*time.Minute, "give up after this long")
	reqTimeout  = flag.Duration("request-timeout", 60*time.Second, "timeout of each request")
)

// newClient returns a clientset with its own connection (see
// loadkit.Clients.Config).
func newClient(cl loadkit.Clients, timeout time.Duration) *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(cl.Config(timeout))
}

// ---- object kinds

type kind interface {
	resource() string
	object(name string) runtime.Object
	create(ctx context.Context, cs kubernetes.Interface, ns string, obj runtime.Object) error
	get(ctx context.Context, cs kubernetes.Interface, ns, name string) error
	list(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (listPage, error)
	watch(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (watch.Interface, error)
	deleteAll(ctx context.Context, cs kubernetes.Interface, ns string) error
	nameOf(obj runtime.Object) (string, bool)
}

// listPage is one LIST response: its items, how many of them this tool
// made, and up to 3 names of the others (e.g. kube-root-ca.crt).
type listPage struct {
	items, ours int
	others      []string
	cont, rv    string
}

func (p *listPage) add(name string) {
	if strings.HasPrefix(name, "obj-") || strings.HasPrefix(name, "w-") {
		p.ours++
	} else if len(p.others) < 3 {
		p.others = append(p.others, name)
	}
}

type configMaps struct{}

func (configMaps) resource() string { return "configmaps" }
func (configMaps) object(name string) runtime.Object {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"k1": strings.Repeat("a", 100), "k2": strings.Repeat("b", 96)},
	}
}
func (configMaps) create(ctx context.Context, cs kubernetes.Interface, ns string, obj runtime.Object) error {
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, obj.(*corev1.ConfigMap), metav1.CreateOptions{})
	return err
}
func (configMaps) get(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	return err
}
func (configMaps) list(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (listPage, error) {
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, o)
	if err != nil {
		return listPage{}, err
	}
	p := listPage{items: len(l.Items), cont: l.Continue, rv: l.ResourceVersion}
	for i := range l.Items {
		p.add(l.Items[i].Name)
	}
	return p, nil
}
func (configMaps) watch(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (watch.Interface, error) {
	return cs.CoreV1().ConfigMaps(ns).Watch(ctx, o)
}
func (configMaps) deleteAll(ctx context.Context, cs kubernetes.Interface, ns string) error {
	return cs.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}
func (configMaps) nameOf(obj runtime.Object) (string, bool) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return "", false
	}
	return cm.Name, true
}

type pods struct{}

func (pods) resource() string { return "pods" }
func (pods) object(name string) runtime.Object {
	grace := int64(30)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"app.kubernetes.io/name": "apiload", "app.kubernetes.io/component": "worker", "tier": "bench"},
			Annotations: map[string]string{
				"apiload.skiff.dev/note": strings.Repeat("x", 160),
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           "registry.example.com/apiload/worker:1.27.3",
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/usr/local/bin/worker"},
				Args:            []string{"--listen=:8080", "--config=/etc/worker/config.yaml", "--log-level=info"},
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{
					{Name: "WORKER_MODE", Value: "benchmark"},
					{Name: "WORKER_SHARDS", Value: "16"},
					{Name: "WORKER_UPSTREAM", Value: "http://upstream.apiload.svc.cluster.local:8080"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/worker", ReadOnly: true}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
					PeriodSeconds: 10,
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromString("http")}},
					InitialDelaySeconds: 5,
					PeriodSeconds:       20,
				},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "worker-config"}},
			}}},
		},
	}
}
func (pods) create(ctx context.Context, cs kubernetes.Interface, ns string, obj runtime.Object) error {
	_, err := cs.CoreV1().Pods(ns).Create(ctx, obj.(*corev1.Pod), metav1.CreateOptions{})
	return err
}
func (pods) get(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return err
}
func (pods) list(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (listPage, error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, o)
	if err != nil {
		return listPage{}, err
	}
	p := listPage{items: len(l.Items), cont: l.Continue, rv: l.ResourceVersion}
	for i := range l.Items {
		p.add(l.Items[i].Name)
	}
	return p, nil
}
func (pods) watch(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.ListOptions) (watch.Interface, error) {
	return cs.CoreV1().Pods(ns).Watch(ctx, o)
}
func (pods) deleteAll(ctx context.Context, cs kubernetes.Interface, ns string) error {
	zero := int64(0) // unscheduled pods go at once anyway; no kubelet would confirm them
	return cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
}
func (pods) nameOf(obj runtime.Object) (string, bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return "", false
	}
	return p.Name, true
}

// ---- statistics

func ms(d time.Duration) float64 { return loadkit.Ms(d) }

func line(s loadkit.LatStats, phase string, c int) string {
	return fmt.Sprintf("%-7s c=%-3d n=%-6d err=%-3d wall=%7.2fs  rate=%8.1f/s  p50=%7.2fms  p99=%7.2fms  max=%7.2fms",
		phase, c, s.Count, s.Errors, s.WallS, s.PerSec, s.P50ms, s.P99ms, s.MaxMs)
}

type listStats struct {
	Mode     string    `json:"mode"`
	Items    int       `json:"items"`
	Ours     int       `json:"items_made_here"`
	Others   []string  `json:"other_items,omitempty"`
	Pages    int       `json:"pages"`
	RunsMs   []float64 `json:"runs_ms"`
	MedianMs float64   `json:"median_ms"`
}

type watchStats struct {
	loadkit.LatStats
	Extra int `json:"unexpected_events"`
}

type round struct {
	Clients   int               `json:"clients"`
	Namespace string            `json:"namespace"`
	Create    *loadkit.LatStats `json:"create,omitempty"`
	Get       *loadkit.LatStats `json:"get,omitempty"`
	List      []listStats       `json:"list,omitempty"`
	Watch     *watchStats       `json:"watch,omitempty"`
	DeleteMs  float64           `json:"deletecollection_ms,omitempty"`
	Remaining int               `json:"remaining_after_delete,omitempty"`
	Problems  []string          `json:"problems,omitempty"`
}

type report struct {
	Server        string           `json:"server"`
	ServerVersion string           `json:"server_version"`
	Objects       string           `json:"objects"`
	ObjectJSONB   int              `json:"object_json_bytes"`
	ObjectProtoB  int              `json:"object_proto_bytes"`
	Protobuf      bool             `json:"protobuf"`
	Rounds        []round          `json:"rounds"`
	Wire          map[string]int64 `json:"wire"`
}

var problemsMu sync.Mutex

// problem records and prints an unexpected outcome, with the server's
// status when it sent one.
func (r *round) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	problemsMu.Lock()
	defer problemsMu.Unlock()
	r.Problems = append(r.Problems, msg)
	fmt.Fprintln(os.Stderr, "  !", msg)
}

func describe(err error) string { return loadkit.Describe(err) }

// errLog prints the first few errors of a phase.
type errLog struct {
	phase string
	n     atomic.Int64
	r     *round
}

func (e *errLog) add(err error) {
	if e.n.Add(1) <= 5 {
		e.r.problem("%s: %s", e.phase, describe(err))
	}
}

// ---- phases

func objName(i int) string { return fmt.Sprintf("obj-%06d", i) }

func phaseCreate(ctx context.Context, k kind, clients []*kubernetes.Clientset, ns string, r *round) []int {
	ok := make([]bool, *n)
	st := loadkit.Run(ctx, len(clients), 0, *n, func(ctx context.Context, w, j int) error {
		if err := k.create(ctx, clients[w], ns, k.object(objName(j))); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		ok[j] = true
		return nil
	}, r.problem)
	r.Create = &st
	fmt.Println(line(st, "CREATE", len(clients)))
	var created []int
	for i, o := range ok {
		if o {
			created = append(created, i)
		}
	}
	return created
}

func phaseGet(ctx context.Context, k kind, clients []*kubernetes.Clientset, ns string, created []int, r *round) {
	if len(created) == 0 {
		r.problem("get: no objects to read")
		return
	}
	total := *gets
	if total <= 0 {
		total = *n
	}
	var next atomic.Int64
	el := &errLog{phase: "get", r: r}
	per := make([][]time.Duration, len(clients))
	var wg sync.WaitGroup
	start := time.Now()
	for ci, cl := range clients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(ci), uint64(start.UnixNano())))
			deadline := start.Add(*getFor)
			for ctx.Err() == nil {
				if *getFor > 0 {
					if time.Now().After(deadline) {
						return
					}
				} else if next.Add(1) > int64(total) {
					return
				}
				name := objName(created[rnd.IntN(len(created))])
				t0 := time.Now()
				err := k.get(ctx, cl, ns, name)
				per[ci] = append(per[ci], time.Since(t0))
				if err != nil {
					el.add(err)
				}
			}
		})
	}
	wg.Wait()
	st := loadkit.Summarize(slices.Concat(per...), el.n.Load(), time.Since(start))
	r.Get = &st
	fmt.Println(line(st, "GET", len(clients)))
}

func phaseList(ctx context.Context, k kind, cl *kubernetes.Clientset, ns string, want int, r *round) {
	modes := []struct {
		label, rv string
		limit     int64
	}{{`rv=""`, "", 0}, {`rv="0"`, "0", 0}, {fmt.Sprintf("limit=%d", *limit), "", *limit}}
	for _, m := range modes {
		ls := listStats{Mode: m.label}
		var ds []time.Duration
		for range max(1, *lists) {
			var all listPage
			pages := 0
			opts := metav1.ListOptions{ResourceVersion: m.rv, Limit: m.limit}
			t0 := time.Now()
			for {
				p, err := k.list(ctx, cl, ns, opts)
				if err != nil {
					r.problem("list %s page %d: %s", m.label, pages+1, describe(err))
					return
				}
				all.items += p.items
				all.ours += p.ours
				all.others = append(all.others, p.others...)
				pages++
				if m.limit > 0 && int64(p.items) > m.limit {
					r.problem("list %s: page %d has %d items, more than the limit", m.label, pages, p.items)
				}
				if p.cont == "" || pages > want+10 {
					break
				}
				opts.Continue = p.cont
			}
			ds = append(ds, time.Since(t0))
			ls.Items, ls.Ours, ls.Others, ls.Pages = all.items, all.ours, all.others, pages
		}
		for _, d := range ds {
			ls.RunsMs = append(ls.RunsMs, ms(d))
		}
		slices.Sort(ds)
		ls.MedianMs = ms(ds[len(ds)/2])
		if ls.Ours != want {
			r.problem("list %s: %d of the objects made here, want %d", m.label, ls.Ours, want)
		}
		if m.limit > 0 && want > int(m.limit) && ls.Pages == 1 {
			r.problem("list %s: all %d items in one page; limit ignored", m.label, ls.Items)
		}
		r.List = append(r.List, ls)
		pg := ""
		if m.limit > 0 {
			pg = fmt.Sprintf(" pages=%d", ls.Pages)
		}
		oth := ""
		if len(ls.Others) > 0 {
			oth = fmt.Sprintf(" (+%d others: %s)", ls.Items-ls.Ours, strings.Join(ls.Others, ","))
		}
		fmt.Printf("%-7s %-10s items=%-6d%s  runs(ms)=%v  median=%.2fms%s\n", "LIST", m.label, ls.Ours, pg, ls.RunsMs, ls.MedianMs, oth)
	}
}

func phaseWatch(ctx context.Context, k kind, cfg loadkit.Clients, ns string, r *round) {
	// The watch starts at the revision of a fresh LIST, as an informer's would,
	// so existing objects do not come as initial events.
	wcl := newClient(cfg, 0) // no client timeout on the long request
	p, err := k.list(ctx, wcl, ns, metav1.ListOptions{Limit: 1})
	if err != nil {
		r.problem("watch: list for the revision: %s", describe(err))
		return
	}
	to := int64(600)
	w, err := k.watch(ctx, wcl, ns, metav1.ListOptions{ResourceVersion: p.rv, TimeoutSeconds: &to})
	if err != nil {
		r.problem("watch: %s", describe(err))
		return
	}
	// Stopping the watch can surface as an ERROR event ("unable to decode an
	// event from the watch stream: http2: response body closed") from
	// client-go's own decoder; events after that point are ignored.
	var stopping atomic.Bool
	defer func() {
		stopping.Store(true)
		w.Stop()
	}()
	type arrival struct {
		name string
		at   time.Time
	}
	got := make(chan arrival, *watchN+16)
	var extra atomic.Int64
	go func() {
		defer close(got)
		for ev := range w.ResultChan() {
			at := time.Now()
			if stopping.Load() {
				continue
			}
			name, ok := k.nameOf(ev.Object)
			if ev.Type != watch.Added || !ok || !strings.HasPrefix(name, "w-") {
				if extra.Add(1) <= 5 {
					r.problem("watch: unexpected event %s %s", ev.Type, eventDetail(ev))
				}
				continue
			}
			got <- arrival{name, at}
		}
	}()
	cr := newClient(cfg, *reqTimeout)
	cr.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}) // warm the connection
	el := &errLog{phase: "watch create", r: r}
	lat := make([]time.Duration, 0, *watchN)
	start := time.Now()
loop:
	for i := range *watchN {
		name := fmt.Sprintf("w-%05d", i)
		obj := k.object(name)
		t0 := time.Now()
		if err := k.create(ctx, cr, ns, obj); err != nil {
			el.add(err)
			continue
		}
		select {
		case a, ok := <-got:
			if !ok {
				r.problem("watch: closed by the server after %d events", len(lat))
				break loop
			}
			if a.name != name {
				r.problem("watch: got %s while waiting for %s", a.name, name)
			}
			lat = append(lat, a.at.Sub(t0))
		case <-time.After(30 * time.Second):
			r.problem("watch: no event for %s within 30s", name)
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	st := watchStats{LatStats: loadkit.Summarize(lat, el.n.Load(), time.Since(start))}
	st.Extra = int(extra.Load())
	r.Watch = &st
	fmt.Printf("%-7s c=1   n=%-6d err=%-3d wall=%7.2fs  create->event p50=%7.2fms  p99=%7.2fms  max=%7.2fms  other-events=%d\n",
		"WATCH", st.Count, st.Errors, st.WallS, st.P50ms, st.P99ms, st.MaxMs, st.Extra)
}

func eventDetail(ev watch.Event) string {
	if st, ok := ev.Object.(*metav1.Status); ok {
		return fmt.Sprintf("status code=%d reason=%s message=%q", st.Code, st.Reason, st.Message)
	}
	return fmt.Sprintf("%T", ev.Object)
}

func phaseDelete(ctx context.Context, k kind, cl *kubernetes.Clientset, ns string, r *round) {
	t0 := time.Now()
	err := k.deleteAll(ctx, cl, ns)
	d := time.Since(t0)
	if err != nil {
		r.problem("deletecollection %s: %s", k.resource(), describe(err))
		return
	}
	r.DeleteMs = ms(d)
	left, err := k.list(ctx, cl, ns, metav1.ListOptions{})
	if err != nil {
		r.problem("list after deletecollection: %s", describe(err))
	}
	r.Remaining = left.ours
	if left.ours != 0 {
		r.problem("deletecollection %s: %d objects made here remain", k.resource(), left.ours)
	}
	fmt.Printf("%-7s deletecollection %s: %.2fms  remaining=%d (others %d: %s)\n", "DELETE", k.resource(), r.DeleteMs,
		left.ours, left.items-left.ours, strings.Join(left.others, ","))
}

func runRound(ctx context.Context, k kind, cfg loadkit.Clients, admin *kubernetes.Clientset, c int, phases map[string]bool) (r round, err error) {
	r.Clients = c
	r.Namespace = fmt.Sprintf("%s-%d-%d", *nsPrefix, c, time.Now().UnixNano()%1_000_000)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}, metav1.CreateOptions{}); err != nil {
		return r, fmt.Errorf("create namespace %s: %s", r.Namespace, describe(err))
	}
	fmt.Printf("-- clients=%d namespace=%s\n", c, r.Namespace)
	defer func() {
		if *keep {
			return
		}
		// Clean up even when interrupted.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if phases["delete"] && ctx.Err() == nil {
			phaseDelete(cctx, k, admin, r.Namespace, &r)
		} else if err := k.deleteAll(cctx, admin, r.Namespace); err != nil {
			r.problem("deletecollection %s: %s", k.resource(), describe(err))
		}
		// The namespace may stay Terminating if nothing finalizes it; don't wait.
		if err := admin.CoreV1().Namespaces().Delete(cctx, r.Namespace, metav1.DeleteOptions{}); err != nil {
			r.problem("delete namespace %s: %s", r.Namespace, describe(err))
		}
	}()

	clients := make([]*kubernetes.Clientset, c)
	for i := range clients {
		clients[i] = newClient(cfg, *reqTimeout)
		// TLS handshake outside the timed region.
		if _, err := clients[i].CoreV1().Namespaces().Get(ctx, r.Namespace, metav1.GetOptions{}); err != nil {
			return r, fmt.Errorf("warm client %d: %s", i, describe(err))
		}
	}
	var created []int
	if phases["create"] {
		created = phaseCreate(ctx, k, clients, r.Namespace, &r)
	}
	if phases["get"] && ctx.Err() == nil {
		phaseGet(ctx, k, clients, r.Namespace, created, &r)
	}
	if phases["list"] && ctx.Err() == nil {
		phaseList(ctx, k, admin, r.Namespace, len(created), &r)
	}
	if phases["watch"] && *watchN > 0 && ctx.Err() == nil {
		phaseWatch(ctx, k, cfg, r.Namespace, &r)
	}
	return r, ctx.Err()
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "apiload:", err)
		os.Exit(1)
	}
}

func run() error {
	var k kind
	switch *objects {
	case "configmap", "configmaps", "cm":
		k = configMaps{}
	case "pod", "pods":
		k = pods{}
	default:
		return fmt.Errorf("-objects %q: want configmap or pod", *objects)
	}
	var counts []int
	for _, f := range strings.Split(*clientsFlag, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return fmt.Errorf("-clients %q: want positive integers separated by commas", *clientsFlag)
		}
		counts = append(counts, c)
	}
	phases := map[string]bool{}
	for _, p := range strings.Split(*phasesFlag, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case "create", "get", "list", "watch", "delete":
			phases[p] = true
		case "":
		default:
			return fmt.Errorf("-phases: unknown phase %q", p)
		}
	}
	base, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	wire := loadkit.NewWire()
	cfg := loadkit.Clients{Base: base, Protobuf: *proto, Wire: wire}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	rep := report{Server: base.Host, Objects: k.resource(), Protobuf: *proto}
	sample := k.object(objName(0))
	if b, err := json.Marshal(sample); err == nil {
		rep.ObjectJSONB = len(b)
	}
	if s, ok := sample.(interface{ Size() int }); ok {
		rep.ObjectProtoB = s.Size()
	}
	admin := newClient(cfg, *reqTimeout)
	if v, err := admin.Discovery().ServerVersion(); err == nil {
		rep.ServerVersion = v.GitVersion
	} else {
		rep.ServerVersion = "unknown: " + describe(err)
	}
	enc := "json"
	if *proto {
		enc = "protobuf"
	}
	fmt.Printf("apiload server=%s version=%s objects=%s (%d B json, %d B proto) encoding=%s n=%d watch=%d clients=%v\n",
		rep.Server, rep.ServerVersion, k.resource(), rep.ObjectJSONB, rep.ObjectProtoB, enc, *n, *watchN, counts)

	var runErr error
	for _, c := range counts {
		r, err := runRound(ctx, k, cfg, admin, c, phases)
		rep.Rounds = append(rep.Rounds, r)
		if err != nil {
			runErr = err
			break
		}
	}
	rep.Wire = wire.Snapshot()
	fmt.Printf("wire: %s\n", wire.Line())
	problems := 0
	for _, r := range rep.Rounds {
		problems += len(r.Problems)
	}
	if problems > 0 {
		fmt.Printf("problems: %d (see above / -json)\n", problems)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return runErr
}
