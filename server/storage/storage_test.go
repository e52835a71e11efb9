package storage

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/registry"
	"skiff/store"
)

func TestStampResourceVersion_MatchesEncodingTheObject(t *testing.T) {
	var cms *registry.Resource
	for _, r := range registry.Builtin(registry.Hooks{}) {
		if r.Name == "configmaps" {
			cms = r
		}
	}
	cases := []struct {
		name string
		obj  *corev1.ConfigMap
	}{
		{"plain", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Data: map[string]string{"k": "v"}}},
		{"nested metadata keys in data", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"metadata": "{"}}, Data: map[string]string{`"metadata":{`: "v"}}},
		{"empty metadata", &corev1.ConfigMap{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stored, err := encode(cms, c.obj)
			if err != nil {
				t.Fatal(err)
			}
			e, err := Decode(cms, store.KeyValue{Key: "/k", Value: stored, ModRevision: 42})
			if err != nil {
				t.Fatal(err)
			}
			var got, want map[string]any
			if err := json.Unmarshal(e.Raw, &got); err != nil {
				t.Fatalf("stamped JSON is invalid: %v: %s", err, e.Raw)
			}
			full, _ := json.Marshal(e.Obj)
			json.Unmarshal(full, &want)
			if g, w := mustJSON(got), mustJSON(want); g != w {
				t.Fatalf("stamped %s\nwant    %s", g, w)
			}
			if got["metadata"].(map[string]any)["resourceVersion"] != "42" {
				t.Fatalf("no resourceVersion in %s", e.Raw)
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
