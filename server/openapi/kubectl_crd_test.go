package openapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"sigs.k8s.io/yaml"
)

// serveCRDs runs the published documents of the built-ins and crds behind
// a real HTTP server, with the legacy discovery kubectl maps resource names
// by.
func serveCRDs(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) (string, *discovery.DiscoveryClient) {
	t.Helper()
	p := publishedWith(t, crds...)
	mux := http.NewServeMux()
	mux.Handle("/openapi/", p.Handler())
	for path, body := range discoveryDocs(crds) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, dc
}

// discoveryDocs are /api, /apis and each custom group-version's resource
// list, as the API server's discovery answers them.
func discoveryDocs(crds []*apiextensionsv1.CustomResourceDefinition) map[string]any {
	docs := map[string]any{
		"/api":    &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}},
		"/api/v1": &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1"},
	}
	groups := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, crd := range crds {
		g := metav1.APIGroup{Name: crd.Spec.Group}
		for _, c := range servedVersions(crd) {
			gv := c.gv()
			gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			g.Versions = append(g.Versions, gvd)
			docs["/apis/"+gv.String()] = &metav1.APIResourceList{
				TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String(),
				APIResources: []metav1.APIResource{{
					Name: crd.Spec.Names.Plural, SingularName: crd.Spec.Names.Singular, Kind: crd.Spec.Names.Kind,
					Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped, ShortNames: crd.Spec.Names.ShortNames,
					Verbs: allVerbs(),
				}},
			}
		}
		g.PreferredVersion = g.Versions[0]
		groups.Groups = append(groups.Groups, g)
	}
	docs["/apis"] = groups
	return docs
}

// TestKubectlClientSideValidation_CustomResources runs the validator
// kubectl uses over /openapi/v2 when the server lacks field validation.
func TestKubectlClientSideValidation_CustomResources(t *testing.T) {
	_, dc := serveCRDs(t, decodeCRD(t, widgetCRD), decodeCRD(t, gadgetCRD))
	models := v2Models(t, dc)
	const widget = `apiVersion: stable.example.com/v1
kind: Widget
metadata: {name: w, labels: {a: b}}
spec:
  color: red
  replicas: 2
  port: http
  parts: [{name: wheel, size: 4}]
  extra: {anything: [1, 2], known: x}
  template: {apiVersion: v1, kind: Pod, whatever: {}}
  labels: {x: y}
`
	tests := []struct {
		name, model, manifest, wantErr string
	}{
		{"a valid widget is accepted", widgetDef, widget, ""},
		{"an unknown spec field is rejected", widgetDef, strings.Replace(widget, "color: red", "color: red\n  colr: typo", 1), `unknown field "colr"`},
		{"a part without its required name is rejected", widgetDef, strings.Replace(widget, "{name: wheel, size: 4}", "{size: 4}", 1), `missing required field "name"`},
		{"unknown metadata fields are rejected", widgetDef, strings.Replace(widget, "name: w,", "name: w, nam: x,", 1), `unknown field "nam"`},
		{"a gadget takes any field", "org.example.tools.v1alpha1.Gadget", "apiVersion: tools.example.org/v1alpha1\nkind: Gadget\nmetadata: {name: g}\na: {b: [{c: d}]}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tt.manifest), &obj); err != nil {
				t.Fatal(err)
			}
			model := models.LookupModel(tt.model)
			if model == nil {
				t.Fatalf("no model %s", tt.model)
			}
			got := ""
			for _, e := range validation.ValidateModel(obj, model, tt.model) {
				got += e.Error() + "\n"
			}
			if (tt.wantErr == "") != (got == "") || !strings.Contains(got, tt.wantErr) {
				t.Fatalf("validation errors:\n%s\nwant %q", got, tt.wantErr)
			}
		})
	}
}

// TestKubectlExplain_CustomKindInV3 follows kubectl explain's v3 lookup
// for a custom kind through client-go.
func TestKubectlExplain_CustomKindInV3(t *testing.T) {
	_, dc := serveCRDs(t, decodeCRD(t, widgetCRD))
	gvk := schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "Widget"}
	doc, err := openapi3.NewRoot(dc.OpenAPIV3()).GVSpec(gvk.GroupVersion())
	if err != nil {
		t.Fatalf("GVSpec: %v", err)
	}
	p, ok := doc.Paths.Paths["/apis/stable.example.com/v1/namespaces/{namespace}/widgets/{name}"]
	if !ok || p.Patch == nil || !eqGVK(p.Patch.Extensions[extGVK], gvk) {
		t.Fatal("no PATCH naming the kind, which kubectl's field validation check needs")
	}
	s := doc.Components.Schemas[widgetDef]
	for _, f := range []string{"spec", "parts", "name"} {
		next, ok := deref3(t, doc.Components.Schemas, s).Properties[f]
		if !ok {
			t.Fatalf("no field %s", f)
		}
		s = &next
	}
	if s.Description != "Name of the part." {
		t.Errorf("description %q", s.Description)
	}
}

// TestKubectl_RealBinary_ExplainAndCreate runs the kubectl on this machine
// against the published documents, as the CustomResourcePublishOpenAPI
// conformance tests do.
func TestKubectl_RealBinary_ExplainAndCreate(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	url, _ := serveCRDs(t, decodeCRD(t, widgetCRD), decodeCRD(t, gadgetCRD))
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		base := []string{"--kubeconfig=" + kubeconfig, "--server=" + url, "--cache-dir=" + filepath.Join(dir, "cache"), "--namespace=default"}
		cmd := exec.CommandContext(ctx, kubectl, append(base, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	tests := []struct {
		name, resource, pattern string
	}{
		{"kind", "widgets", `(?s)KIND:\s+Widget.*DESCRIPTION:.*Widget is a thing for testing.*FIELDS:.*apiVersion.*<string>.*APIVersion defines.*spec.*<Object>.*Specification of the widget`},
		{"metadata", "widgets.metadata", `(?s)DESCRIPTION:.*Standard object's metadata.*FIELDS:.*creationTimestamp.*<string>.*CreationTimestamp is a timestamp`},
		{"nested", "widgets.spec", `(?s)DESCRIPTION:.*Specification of the widget.*FIELDS:.*color.*<string>.*-required-.*Color of the widget.*parts.*<\[\]Object>.*Parts by name`},
		{"list items", "widgets.spec.parts", `(?s)FIELD:\s+parts.*<\[\]Object>.*DESCRIPTION:.*Parts by name.*FIELDS:.*name.*<string>.*Name of the part`},
		{"short name and other version", "wd.spec.colour --api-version=stable.example.com/v2beta1", `(?s)VERSION:\s+v2beta1.*Colour in v2beta1`},
		{"keeps unknown fields at the root", "gadgets", `(?s)KIND:\s+Gadget.*DESCRIPTION:.*Gadget keeps whatever it is given`},
	}
	for _, tt := range tests {
		t.Run("explain "+tt.name, func(t *testing.T) {
			out, err := run("", append([]string{"explain"}, strings.Fields(tt.resource)...)...)
			if err != nil {
				t.Fatalf("kubectl explain %s: %v\n%s", tt.resource, err, out)
			}
			if !regexp.MustCompile(tt.pattern).MatchString(out) {
				t.Errorf("kubectl explain %s:\n%s\ndoes not match %s", tt.resource, out, tt.pattern)
			}
		})
	}
	t.Run("explain a missing field", func(t *testing.T) {
		out, err := run("", "explain", "widgets.spec.bars2")
		if err == nil || !strings.Contains(out, `field "bars2" does not exist`) {
			t.Errorf("kubectl explain widgets.spec.bars2: %v\n%s", err, out)
		}
	})
	// kubectl looks for the fieldValidation parameter of the kind's PATCH in
	// /openapi/v3 before it sends; a document without it fails the command.
	t.Run("create checks field validation support", func(t *testing.T) {
		const widget = `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}`
		out, err := run(widget, "create", "--validate=strict", "--dry-run=client", "-o", "name", "-f", "-")
		if err != nil || !strings.Contains(out, "widget.stable.example.com/w") {
			t.Errorf("kubectl create: %v\n%s", err, out)
		}
	})
}
