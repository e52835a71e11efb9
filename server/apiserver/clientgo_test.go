package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// recorder collects informer notifications in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { cm := o.(*corev1.ConfigMap); r.add("add " + cm.Name + "=" + cm.Data["v"]) },
		UpdateFunc: func(_, o any) {
			cm := o.(*corev1.ConfigMap)
			r.add("update " + cm.Name + "=" + cm.Data["v"])
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			r.add("delete " + o.(*corev1.ConfigMap).Name)
		},
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startInformer(t *testing.T, client kubernetes.Interface, r *recorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("default"))
	inf := f.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(r.handler()); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	syncCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		cancel()
		t.Fatal("informer did not sync")
	}
	t.Cleanup(func() {
		cancel() // Shutdown waits for the informers, which stop on cancel
		f.Shutdown()
	})
}

func TestInformer_SeesAddUpdateDeleteInOrder(t *testing.T) {
	h := newHarness(t)
	r := &recorder{}
	startInformer(t, h.client, r)
	ctx := context.Background()
	cms := h.client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "[add a=1 update a=2 delete a]"
	waitFor(t, want, func() bool { return fmt.Sprint(r.snapshot()) == want })
}

// gate blocks new watch requests while closed, to cut an informer off.
type gate struct {
	next   http.Handler
	closed atomic.Bool
	lists  atomic.Int64
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	watching := r.URL.Query().Get("watch") == "true"
	// A relist is a LIST, or (newer client-go) a watch-list that starts over
	// with sendInitialEvents.
	relist := !watching || r.URL.Query().Get("sendInitialEvents") == "true"
	if relist && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/configmaps") {
		g.lists.Add(1)
	}
	for watching && g.closed.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	g.next.ServeHTTP(w, r)
}

func TestInformer_WatchExpired_RecoversByRelisting(t *testing.T) {
	h := newHarness(t)
	h.cache.SetHistory(8)
	g := &gate{next: h.srv.Config.Handler}
	h.srv.Config.Handler = g
	r := &recorder{}
	startInformer(t, h.client, r)
	ctx := context.Background()
	cms := h.client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hot"}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first event", func() bool { return len(r.snapshot()) == 1 })
	listsBefore := g.lists.Load()

	// Cut the informer's watch off and write more than the cache keeps: its
	// resourceVersion is then too old (410), and it must relist.
	g.closed.Store(true)
	h.srv.CloseClientConnections()
	// A writer of its own: no connection of the informer's is reused.
	wcfg := rest.CopyConfig(h.cfg)
	wcfg.Transport = &http.Transport{DisableKeepAlives: true}
	cms = kubernetes.NewForConfigOrDie(wcfg).CoreV1().ConfigMaps("default")
	for i := 1; i <= 40; i++ {
		if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hot"}, Data: map[string]string{"v": fmt.Sprint(i)}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g.closed.Store(false)
	waitFor(t, "the informer to catch up", func() bool {
		ev := r.snapshot()
		return ev[len(ev)-1] == "update hot=40"
	})
	if g.lists.Load() == listsBefore {
		t.Fatal("the informer caught up without relisting: the watch never expired")
	}
}

func TestWatch_FromTooOldResourceVersion_Returns410(t *testing.T) {
	h := newHarness(t)
	h.cache.SetHistory(2)
	ctx := context.Background()
	cms := h.client.CoreV1().ConfigMaps("default")
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last *corev1.ConfigMap
	for i := 0; i < 10; i++ {
		if last, err = cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lastRev, _ := strconv.ParseInt(last.ResourceVersion, 10, 64)
	waitFor(t, "the cache", func() bool { return h.cache.Revision() >= lastRev })
	code, body := h.do(t, http.MethodGet, "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion="+first.ResourceVersion, "", "")
	if code != http.StatusGone || !strings.Contains(body, "too old resource version") {
		t.Fatalf("watch from an expired resourceVersion: %d %s", code, body)
	}
}

func TestWatchList_SendsInitialEventsThenABookmark(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		if _, err := h.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	send := true
	w, err := h.client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{
		SendInitialEvents: &send, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for ev := range w.ResultChan() {
		cm := ev.Object.(*corev1.ConfigMap)
		if ev.Type == watch.Bookmark {
			if cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" || cm.ResourceVersion == "" {
				t.Fatalf("bookmark without the initial-events-end annotation: %+v", cm.ObjectMeta)
			}
			break
		}
		got = append(got, string(ev.Type)+" "+cm.Name)
	}
	if fmt.Sprint(got) != "[ADDED a ADDED b]" {
		t.Fatalf("initial events %v", got)
	}
}
