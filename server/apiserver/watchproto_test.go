package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
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

// watchTypes records the Content-Type of every watch response.
type watchTypes struct {
	mu   sync.Mutex
	seen []string
	next http.RoundTripper
}

func (w *watchTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(r)
	if err == nil && r.URL.Query().Get("watch") == "true" {
		w.mu.Lock()
		w.seen = append(w.seen, resp.Header.Get("Content-Type"))
		w.mu.Unlock()
	}
	return resp, err
}

func (w *watchTypes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

func TestWatch_ProtobufClient_GetsProtobufStream(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &watchTypes{}
	cfg := rest.CopyConfig(h.cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	cs := kubernetes.NewForConfigOrDie(cfg)
	cms := cs.CoreV1().ConfigMaps("default")

	// A plain watch decodes protobuf frames, bookmarks included.
	w, err := cms.Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Added || !ok || cm.Name != "a" || cm.Data["k"] != "v" || cm.ResourceVersion == "" {
			t.Fatalf("event %s %#v, want ADDED configmap a with its data", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no event")
	}

	// An informer (watch-list with its initial-events bookmark, then a
	// watch) sees the existing object and a new one.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(inf.GetStore().ListKeys()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("informer holds %v, want default/a and default/b", inf.GetStore().ListKeys())
		}
		time.Sleep(20 * time.Millisecond)
	}
	types := rec.all()
	if len(types) == 0 {
		t.Fatal("no watch response seen")
	}
	for _, ct := range types {
		if !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") || !strings.Contains(ct, "stream=watch") {
			t.Errorf("watch response Content-Type %q, want the protobuf watch stream", ct)
		}
	}
}
