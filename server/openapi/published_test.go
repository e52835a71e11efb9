package openapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// builtinOnce shares the costly built-in build among the tests.
var builtinOnce = sync.OnceValues(func() (*Documents, error) {
	return Build(builtinResources(), "Kubernetes", "v1.33.0")
})

func publishedWith(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) *Published {
	t.Helper()
	d, err := builtinOnce()
	if err != nil {
		t.Fatal(err)
	}
	p := NewPublished(d)
	if err := p.SetCustomResources(crds); err != nil {
		t.Fatalf("SetCustomResources: %v", err)
	}
	return p
}

func fetchV2(t *testing.T, h http.Handler) (*spec.Swagger, string) {
	t.Helper()
	w := get(h, http.MethodGet, "/openapi/v2", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /openapi/v2: %d %s", w.Code, w.Body.String())
	}
	sw := &spec.Swagger{}
	if err := json.Unmarshal(w.Body.Bytes(), sw); err != nil {
		t.Fatalf("v2 is not JSON Swagger: %v", err)
	}
	return sw, w.Header().Get("ETag")
}

func fetchIndex(t *testing.T, h http.Handler) v3Index {
	t.Helper()
	var index v3Index
	if err := json.Unmarshal(get(h, http.MethodGet, "/openapi/v3", nil).Body.Bytes(), &index); err != nil {
		t.Fatal(err)
	}
	return index
}

func TestPublished_SetCustomResources_AddsAndRemovesCRDs(t *testing.T) {
	p := publishedWith(t)
	h := p.Handler()
	before, beforeTag := fetchV2(t, h)
	if _, ok := before.Definitions[widgetDef]; ok {
		t.Fatal("a CRD is published before it is set")
	}

	if err := p.SetCustomResources([]*apiextensionsv1.CustomResourceDefinition{decodeCRD(t, widgetCRD), decodeCRD(t, gadgetCRD)}); err != nil {
		t.Fatal(err)
	}
	after, afterTag := fetchV2(t, h)
	msg := all(
		eq("v2 ETag changed", afterTag != beforeTag, true),
		eq("widget v1 published", hasDef(after, widgetDef), true),
		eq("widget v2beta1 published", hasDef(after, "com.example.stable.v2beta1.Widget"), true),
		eq("unserved v0 not published", hasDef(after, "com.example.stable.v0.Widget"), false),
		eq("gadget published", hasDef(after, "org.example.tools.v1alpha1.Gadget"), true),
		eq("built-ins kept", hasDef(after, "io.k8s.api.core.v1.Pod"), true),
		eq("built-in definitions all kept", len(after.Definitions), len(before.Definitions)+6),
		eq("widget scale path", after.Paths.Paths["/apis/stable.example.com/v1/namespaces/{namespace}/widgets/{name}/scale"].Patch != nil, true),
		eq("built-in paths kept", after.Paths.Paths["/api/v1/namespaces/{namespace}/pods"].Get != nil, true),
	)
	if msg != "" {
		t.Fatal(msg)
	}
	index := fetchIndex(t, h)
	for _, gv := range []string{"apis/stable.example.com/v1", "apis/stable.example.com/v2beta1", "apis/tools.example.org/v1alpha1", "api/v1"} {
		entry, ok := index.Paths[gv]
		if !ok {
			t.Errorf("index lacks %s", gv)
			continue
		}
		w := get(h, http.MethodGet, entry.ServerRelativeURL, nil)
		if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "public, immutable" {
			t.Errorf("%s: %d, Cache-Control %q", entry.ServerRelativeURL, w.Code, w.Header().Get("Cache-Control"))
		}
	}
	if _, ok := index.Paths["apis/stable.example.com/v0"]; ok {
		t.Error("index lists the unserved version")
	}
	oldURL := index.Paths["apis/stable.example.com/v1"].ServerRelativeURL

	// The widget's v2beta1 stops being served, the gadget is deleted.
	widget := decodeCRD(t, widgetCRD)
	widget.Spec.Versions[1].Served = false
	if err := p.SetCustomResources([]*apiextensionsv1.CustomResourceDefinition{widget}); err != nil {
		t.Fatal(err)
	}
	last, lastTag := fetchV2(t, h)
	index = fetchIndex(t, h)
	msg = all(
		eq("v2 ETag changed again", lastTag != afterTag, true),
		eq("widget v1 still published", hasDef(last, widgetDef), true),
		eq("unserved v2beta1 removed", hasDef(last, "com.example.stable.v2beta1.Widget"), false),
		eq("deleted gadget removed", hasDef(last, "org.example.tools.v1alpha1.Gadget"), false),
		eq("gadget paths removed", last.Paths.Paths["/apis/tools.example.org/v1alpha1/gadgets"].Get == nil, true),
		eq("index drops the unserved version", hasKey(index, "apis/stable.example.com/v2beta1"), false),
		eq("index drops the deleted CRD", hasKey(index, "apis/tools.example.org/v1alpha1"), false),
		eq("deleted group-version is not found", get(h, http.MethodGet, "/openapi/v3/apis/tools.example.org/v1alpha1", nil).Code, http.StatusNotFound),
		eq("unchanged v1 document keeps its hash", index.Paths["apis/stable.example.com/v1"].ServerRelativeURL, oldURL),
	)
	if msg != "" {
		t.Fatal(msg)
	}

	if err := p.SetCustomResources(nil); err != nil {
		t.Fatal(err)
	}
	if _, tag := fetchV2(t, h); tag != beforeTag {
		t.Errorf("with no CRDs the v2 ETag is %s, want the built-ins' %s", tag, beforeTag)
	}
}

func hasDef(sw *spec.Swagger, name string) bool { _, ok := sw.Definitions[name]; return ok }

func hasKey(index v3Index, key string) bool { _, ok := index.Paths[key]; return ok }

func TestPublished_IfNoneMatch_NotModifiedUntilCRDsChange(t *testing.T) {
	p := publishedWith(t, decodeCRD(t, widgetCRD))
	h := p.Handler()
	_, tag := fetchV2(t, h)
	if w := get(h, http.MethodGet, "/openapi/v2", map[string]string{"If-None-Match": tag}); w.Code != http.StatusNotModified {
		t.Fatalf("unchanged document: %d, want 304", w.Code)
	}
	if err := p.SetCustomResources(nil); err != nil {
		t.Fatal(err)
	}
	if w := get(h, http.MethodGet, "/openapi/v2", map[string]string{"If-None-Match": tag}); w.Code != http.StatusOK {
		t.Fatalf("after the CRD is gone: %d, want 200", w.Code)
	}
}

func TestPublished_CRDGroupVersionDocument_IsSelfContained(t *testing.T) {
	p := publishedWith(t, decodeCRD(t, widgetCRD))
	w := get(p.Handler(), http.MethodGet, "/openapi/v3/apis/stable.example.com/v1", nil)
	var doc spec3.OpenAPI
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	// Every $ref must resolve inside the document: kubectl explain reads
	// only this one.
	for name, s := range doc.Components.Schemas {
		walkRefs(s, func(ref string) {
			if _, ok := doc.Components.Schemas[ref]; !ok {
				t.Errorf("%s refers to %s, which the document lacks", name, ref)
			}
		})
	}
	for _, want := range []string{widgetDef, widgetListDef, objectMetaDef, listMetaDef, scaleDef, statusDef, deleteOptionsDef, patchDef} {
		if _, ok := doc.Components.Schemas[want]; !ok {
			t.Errorf("document lacks %s", want)
		}
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.core.v1.Pod"]; ok {
		t.Error("document carries built-in kinds it does not use")
	}
	if doc.Info == nil || doc.Info.Title != "Kubernetes CRD Swagger" {
		t.Errorf("info %+v", doc.Info)
	}
}

func TestPublished_BeforeBuiltins_ServiceUnavailableThenBoth(t *testing.T) {
	p := NewPublished(nil)
	if err := p.SetCustomResources([]*apiextensionsv1.CustomResourceDefinition{decodeCRD(t, gadgetCRD)}); err != nil {
		t.Fatal(err)
	}
	if w := get(p.Handler(), http.MethodGet, "/openapi/v2", nil); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("before the built-ins: %d, want 503", w.Code)
	}
	d, err := builtinOnce()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetBuiltins(d); err != nil {
		t.Fatal(err)
	}
	sw, _ := fetchV2(t, p.Handler())
	if !hasDef(sw, "org.example.tools.v1alpha1.Gadget") || !hasDef(sw, "io.k8s.api.core.v1.Pod") {
		t.Error("the CRDs set before the built-ins are not published with them")
	}
}

func TestPublished_ConflictingCRD_IsReportedOthersPublished(t *testing.T) {
	p := publishedWith(t)
	twin := decodeCRD(t, widgetCRD)
	twin.Name = "widgets2.stable.example.com" // same kind and plural in the same group
	err := p.SetCustomResources([]*apiextensionsv1.CustomResourceDefinition{decodeCRD(t, widgetCRD), twin, decodeCRD(t, gadgetCRD)})
	if err == nil || !strings.Contains(err.Error(), "widgets2.stable.example.com") {
		t.Fatalf("error %v, want one naming the conflicting CRD", err)
	}
	sw, _ := fetchV2(t, p.Handler())
	if !hasDef(sw, widgetDef) || !hasDef(sw, "org.example.tools.v1alpha1.Gadget") {
		t.Error("the CRDs without conflict are not published")
	}
}

func TestPublished_V2Document_IsValidSwaggerInProtobuf(t *testing.T) {
	p := publishedWith(t, decodeCRD(t, widgetCRD))
	w := get(p.Handler(), http.MethodGet, "/openapi/v2", map[string]string{"Accept": mediaV2ProtoAt})
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != mediaV2Proto {
		t.Fatalf("protobuf v2: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	if n, _ := strconv.Atoi(w.Header().Get("Content-Length")); n == 0 {
		t.Fatal("empty protobuf document")
	}
}

// TestPublished_ConcurrentChangesAndRequests_EachResponseIsOneSnapshot
// serves while CRDs change: every v2 response is a whole document with the
// widget either fully there (kind and list) or fully absent.
func TestPublished_ConcurrentChangesAndRequests_EachResponseIsOneSnapshot(t *testing.T) {
	p := publishedWith(t)
	h := p.Handler()
	widget := decodeCRD(t, widgetCRD)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			var crds []*apiextensionsv1.CustomResourceDefinition
			if i%2 == 0 {
				crds = append(crds, widget)
			}
			if err := p.SetCustomResources(crds); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 20 {
		sw, _ := fetchV2(t, h)
		if hasDef(sw, widgetDef) != hasDef(sw, widgetListDef) {
			t.Fatal("a response mixes two sets of CRDs")
		}
	}
	wg.Wait()
}
