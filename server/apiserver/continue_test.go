package apiserver_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/apiserver/apitest"
)

// TestList_ContinueAfterCompaction_ResumesAtTheNextKey: a continue token
// whose snapshot was compacted gets 410 with an inconsistent-continue
// token; following it lists exactly the items not yet seen, once each, at
// one newer resourceVersion.
func TestList_ContinueAfterCompaction_ResumesAtTheNextKey(t *testing.T) {
	s := apitest.Start(t, apitest.Options{Authenticator: testAdmin{}})
	srv := httptest.NewServer(s.API.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1, Timeout: 30 * time.Second})
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "chunks"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const total, limit = 10, 3
	for i := range total {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}}
		if _, err := client.CoreV1().ConfigMaps("chunks").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms := client.CoreV1().ConfigMaps("chunks")
	first, err := cms.List(ctx, metav1.ListOptions{Limit: limit})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v, continue %q", err, first.Continue)
	}
	// A later write, then compaction past the first page's snapshot.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rev, err := s.Store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}

	_, err = cms.List(ctx, metav1.ListOptions{Limit: limit, Continue: first.Continue})
	status, ok := err.(apierrors.APIStatus)
	if !apierrors.IsResourceExpired(err) || !ok || status.Status().ListMeta.Continue == "" {
		t.Fatalf("continue after compaction = %v, want 410 Expired with a new continue token", err)
	}
	seen := map[string]int{}
	for _, cm := range first.Items {
		seen[cm.Name]++
	}
	token, pageRV := status.Status().ListMeta.Continue, ""
	for token != "" {
		page, err := cms.List(ctx, metav1.ListOptions{Limit: limit, Continue: token})
		if err != nil {
			t.Fatalf("inconsistent continue: %v", err)
		}
		if pageRV == "" {
			pageRV = page.ResourceVersion
			if pageRV == first.ResourceVersion {
				t.Errorf("resumed list at the compacted resourceVersion %s", pageRV)
			}
		} else if page.ResourceVersion != pageRV {
			t.Errorf("page resourceVersion %s, want %s for every resumed page", page.ResourceVersion, pageRV)
		}
		if page.Continue != "" && (page.RemainingItemCount == nil || int(*page.RemainingItemCount)+len(page.Items)+len(seen) != total) {
			t.Errorf("remainingItemCount %v with %d on the page and %d seen, want them to add up to %d", page.RemainingItemCount, len(page.Items), len(seen), total)
		}
		for _, cm := range page.Items {
			seen[cm.Name]++
		}
		token = page.Continue
	}
	if len(seen) != total {
		t.Errorf("listed %d distinct objects, want %d", len(seen), total)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", name, n)
		}
	}
}
