package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"skiff/e2e/bench/loadkit"
)

// kind is one side of the comparison: its resource and the objects made
// of it. Both sides go through the dynamic client, so the client's costs
// are the same and what differs is the server.
type kind struct {
	label  string
	gvr    schema.GroupVersionResource
	ns     string
	object func(name string) *unstructured.Unstructured
}

func (k kind) path() string {
	prefix := "/apis/" + k.gvr.Group + "/" + k.gvr.Version
	if k.gvr.Group == "" {
		prefix = "/api/" + k.gvr.Version
	}
	return prefix + "/namespaces/" + k.ns + "/" + k.gvr.Resource
}

// The payload of both kinds is the same two strings, as in apiload's
// ConfigMaps (about 200 B of data).
var payload1, payload2 = strings.Repeat("a", 100), strings.Repeat("b", 96)

func widgetKind(group, ns string) kind {
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: crdPlural}
	return kind{label: "widgets", gvr: gvr, ns: ns, object: func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": crdKind,
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"k1": payload1, "k2": payload2, "replicas": int64(3)},
		}}
	}}
}

func configMapKind(ns string) kind {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	return kind{label: "configmaps", gvr: gvr, ns: ns, object: func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name},
			"data":     map[string]any{"k1": payload1, "k2": payload2},
		}}
	}}
}

func objName(i int) string { return fmt.Sprintf("obj-%06d", i) }

// createPhase creates objects [from, to) of k with one goroutine per
// client, each client its own connection. It prints the first 5 errors.
func createPhase(ctx context.Context, k kind, clients []dynamic.Interface, from, to int, pr *loadkit.Problems) loadkit.LatStats {
	return loadkit.Run(ctx, len(clients), from, to, func(ctx context.Context, w, j int) error {
		if _, err := clients[w].Resource(k.gvr).Namespace(k.ns).Create(ctx, k.object(objName(j)), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s %s: %w", k.label, objName(j), err)
		}
		return nil
	}, pr.Add)
}

type listStats struct {
	Kind     string    `json:"kind"`
	Mode     string    `json:"mode"`
	Items    int       `json:"items"`
	Ours     int       `json:"items_made_here"`
	Pages    int       `json:"pages"`
	Bytes    int       `json:"bytes"`
	RunsMs   []float64 `json:"runs_ms"`
	MedianMs float64   `json:"median_ms"`
}

// listPage is the part of a list response this tool reads; decoding only
// it keeps the client's share of the time small and alike for both kinds.
type listPage struct {
	Metadata struct {
		Continue        string `json:"continue"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
}

// listAll reads every page of k's list and gives the items, those named
// like ours, the pages and the bytes received.
func listAll(ctx context.Context, hc *http.Client, host string, k kind, rv string, limit int64) (ls listStats, err error) {
	cont := ""
	for {
		q := url.Values{}
		if rv != "" {
			q.Set("resourceVersion", rv)
		}
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		if cont != "" {
			q.Set("continue", cont)
		}
		code, b, err := getStatus(ctx, hc, host, k.path()+"?"+q.Encode())
		if err != nil {
			return ls, fmt.Errorf("page %d: %w", ls.Pages+1, err)
		}
		if code != http.StatusOK {
			return ls, fmt.Errorf("page %d: %d %s", ls.Pages+1, code, truncate(b, 300))
		}
		var p listPage
		if err := json.Unmarshal(b, &p); err != nil {
			return ls, fmt.Errorf("page %d: %w", ls.Pages+1, err)
		}
		ls.Pages++
		ls.Bytes += len(b)
		ls.Items += len(p.Items)
		for _, it := range p.Items {
			if strings.HasPrefix(it.Metadata.Name, "obj-") {
				ls.Ours++
			}
		}
		if limit > 0 && int64(len(p.Items)) > limit {
			return ls, fmt.Errorf("page %d has %d items, more than the limit %d", ls.Pages, len(p.Items), limit)
		}
		cont = p.Metadata.Continue
		if cont == "" || ls.Pages > 100_000 {
			return ls, nil
		}
	}
}

// listPhase times full and paginated lists of k, median of runs each.
func listPhase(ctx context.Context, hc *http.Client, host string, k kind, want, runs int, limit int64, pr *loadkit.Problems) []listStats {
	modes := []struct {
		label, rv string
		limit     int64
	}{{`rv=""`, "", 0}, {`rv="0"`, "0", 0}, {fmt.Sprintf("limit=%d", limit), "", limit}}
	var out []listStats
	for _, m := range modes {
		var ds []time.Duration
		var ls listStats
		for range max(1, runs) {
			t0 := time.Now()
			got, err := listAll(ctx, hc, host, k, m.rv, m.limit)
			if err != nil {
				pr.Add("list %s %s: %v", k.label, m.label, err)
				break
			}
			ds = append(ds, time.Since(t0))
			ls = got
		}
		ls.Kind, ls.Mode = k.label, m.label
		for _, d := range ds {
			ls.RunsMs = append(ls.RunsMs, loadkit.Ms(d))
		}
		ls.MedianMs = loadkit.Ms(loadkit.Median(ds))
		if len(ds) > 0 && ls.Ours != want {
			pr.Add("list %s %s: %d of the objects made here, want %d", k.label, m.label, ls.Ours, want)
		}
		if len(ds) > 0 && m.limit > 0 && want > int(m.limit) && ls.Pages == 1 {
			pr.Add("list %s %s: all %d items in one page; limit ignored", k.label, m.label, ls.Items)
		}
		fmt.Printf("LIST   %-10s %-10s items=%-6d pages=%-4d bytes=%-9d runs(ms)=%v median=%.1fms\n",
			k.label, m.label, ls.Items, ls.Pages, ls.Bytes, ls.RunsMs, ls.MedianMs)
		out = append(out, ls)
	}
	return out
}

// checkSemantics makes sure the CRD's schema is enforced, so the figures
// are of a server that does the work: the default is applied, the CEL
// rule rejects a breaking object with 422, and /status takes an update.
func checkSemantics(ctx context.Context, dyn dynamic.Interface, k kind, pr *loadkit.Problems) {
	res := dyn.Resource(k.gvr).Namespace(k.ns)
	got, err := res.Create(ctx, k.object("check-default"), metav1.CreateOptions{})
	if err != nil {
		pr.Add("check: create %s: %s", k.label, loadkit.Describe(err))
		return
	}
	if mode, _, _ := unstructured.NestedString(got.Object, "spec", "mode"); mode != "fast" {
		pr.Add("check: spec.mode = %q after create, want the schema default \"fast\"", mode)
	}
	bad := k.object("check-rule")
	_ = unstructured.SetNestedField(bad.Object, strings.Repeat("x", 250), "spec", "k1")
	_ = unstructured.SetNestedField(bad.Object, strings.Repeat("y", 250), "spec", "k2")
	if _, err := res.Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		pr.Add("check: an object breaking %q was accepted", ruleText)
	} else if !strings.Contains(err.Error(), "exceed 400") {
		pr.Add("check: object breaking the rule: want 422 with the rule's message, got %s", loadkit.Describe(err))
	}
	_ = unstructured.SetNestedField(got.Object, int64(3), "status", "observedReplicas")
	st, err := res.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		pr.Add("check: update status: %s", loadkit.Describe(err))
	} else if v, _, _ := unstructured.NestedInt64(st.Object, "status", "observedReplicas"); v != 3 {
		pr.Add("check: status.observedReplicas = %d after /status update, want 3", v)
	}
	if err := res.Delete(ctx, "check-default", metav1.DeleteOptions{}); err != nil {
		pr.Add("check: delete: %s", loadkit.Describe(err))
	}
}

// storedSize is the JSON size of a freshly created object of k as the
// server returns it (with its metadata), for the size comparison.
func storedSize(ctx context.Context, dyn dynamic.Interface, k kind, name string) (int, error) {
	got, err := dyn.Resource(k.gvr).Namespace(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	b, err := json.Marshal(got.Object)
	return len(b), err
}
