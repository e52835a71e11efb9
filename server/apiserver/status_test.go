package apiserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestStatusWrite_TakesMetadata_KeepsSpec: a write to /status stores the
// request's status and metadata but never its spec, except for the
// metadata a kind's upstream status strategy keeps as stored.
func TestStatusWrite_TakesMetadata_KeepsSpec(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name, path, create, patch string
		// want maps a JSON path (dot-separated) to the value expected
		// after the patch ("" for absent).
		want map[string]string
	}{{
		name:   "namespace takes annotations and labels",
		path:   "/api/v1/namespaces",
		create: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"st-ns"}}`,
		patch:  `{"metadata":{"annotations":{"a":"1"},"labels":{"l":"1"}},"spec":{"finalizers":["x.example.com/f"]},"status":{"conditions":[{"type":"StatusPatch","status":"True","reason":"E2E"}]}}`,
		want: map[string]string{
			"metadata.annotations.a": "1", "metadata.labels.l": "1",
			"spec.finalizers.0":          "kubernetes",
			"status.conditions.0.reason": "E2E",
		},
	}, {
		name:   "ingress takes annotations, not spec",
		path:   "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
		create: `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"st-ing"},"spec":{"defaultBackend":{"service":{"name":"a","port":{"number":80}}}}}`,
		patch:  `{"metadata":{"annotations":{"patchedstatus":"true"}},"spec":{"defaultBackend":{"service":{"name":"b"}}},"status":{"loadBalancer":{"ingress":[{"ip":"10.0.0.9"}]}}}`,
		want: map[string]string{
			"metadata.annotations.patchedstatus": "true",
			"spec.defaultBackend.service.name":   "a",
			"status.loadBalancer.ingress.0.ip":   "10.0.0.9",
		},
	}, {
		name:   "deployment keeps labels, takes annotations",
		path:   "/apis/apps/v1/namespaces/default/deployments",
		create: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"st-dep","labels":{"app":"a"}},"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`,
		patch:  `{"metadata":{"labels":{"app":"changed"},"annotations":{"rev":"2"}},"spec":{"replicas":5},"status":{"observedGeneration":1}}`,
		want: map[string]string{
			"metadata.labels.app": "a", "metadata.annotations.rev": "2",
			"spec.replicas": "1", "status.observedGeneration": "1",
		},
	}, {
		name:   "volume attachment keeps all metadata",
		path:   "/apis/storage.k8s.io/v1/volumeattachments",
		create: `{"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"st-va"},"spec":{"attacher":"x.example.com","nodeName":"n1","source":{"persistentVolumeName":"pv1"}}}`,
		patch:  `{"metadata":{"annotations":{"a":"1"}},"status":{"attached":true}}`,
		want:   map[string]string{"metadata.annotations.a": "", "status.attached": "true"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := h.do(t, http.MethodPost, tc.path, "application/json", tc.create); code != http.StatusCreated {
				t.Fatalf("create: %d %s", code, body)
			}
			code, body := h.do(t, http.MethodPatch, tc.path+"/"+objectName(t, tc.create)+"/status", "application/merge-patch+json", tc.patch)
			if code != http.StatusOK {
				t.Fatalf("patch status: %d %s", code, body)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			for path, want := range tc.want {
				if v := lookupJSON(got, path); v != want {
					t.Errorf("%s = %q, want %q", path, v, want)
				}
			}
			// A GET sees what the patch answered: it was stored.
			_, body = h.do(t, http.MethodGet, tc.path+"/"+objectName(t, tc.create), "", "")
			var stored map[string]any
			json.Unmarshal([]byte(body), &stored)
			for path, want := range tc.want {
				if v := lookupJSON(stored, path); v != want {
					t.Errorf("stored %s = %q, want %q", path, v, want)
				}
			}
		})
	}
}

func objectName(t *testing.T, obj string) string {
	t.Helper()
	var o struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(obj), &o); err != nil {
		t.Fatal(err)
	}
	return o.Metadata.Name
}

// lookupJSON follows a dot-separated path through decoded JSON (numbers
// index lists) and formats what it finds; "" when absent.
func lookupJSON(v any, path string) string {
	for _, part := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[part]
		case []any:
			i := 0
			for _, r := range part {
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				return ""
			}
			v = c[i]
		default:
			return ""
		}
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
