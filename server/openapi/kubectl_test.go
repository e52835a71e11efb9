package openapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// serveDocs runs the handler behind a real HTTP server so that client-go's
// own discovery and OpenAPI clients, which kubectl uses, talk to it.
func serveDocs(t *testing.T) (*Documents, *discovery.DiscoveryClient) {
	t.Helper()
	d := buildDocs(t)
	mux := http.NewServeMux()
	mux.Handle("/openapi/", d.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return d, dc
}

// v2Models fetches /openapi/v2 the way kubectl does (protobuf only) and
// parses it as kubectl explain and client-side validation do.
func v2Models(t *testing.T, dc *discovery.DiscoveryClient) proto.Models {
	t.Helper()
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("fetch v2 document: %v", err)
	}
	models, err := proto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatalf("parse v2 document: %v", err)
	}
	return models
}

func TestKubectlExplainWalksPodSpecContainersImageInV2(t *testing.T) {
	_, dc := serveDocs(t)
	models := v2Models(t, dc)
	pod, ok := models.LookupModel("io.k8s.api.core.v1.Pod").(*proto.Kind)
	if !ok {
		t.Fatal("Pod is not an object model")
	}
	spec := resolve(t, pod.Fields["spec"]).(*proto.Kind)
	containers, ok := resolve(t, spec.Fields["containers"]).(*proto.Array)
	if !ok {
		t.Fatalf("containers is %T, want an array", spec.Fields["containers"])
	}
	container := resolve(t, containers.SubType).(*proto.Kind)
	image, ok := resolve(t, container.Fields["image"]).(*proto.Primitive)
	if !ok || image.Type != "string" {
		t.Fatalf("image is %#v, want a string", container.Fields["image"])
	}
	msg := all(
		prefix("image description", image.GetDescription(), "Container image name."),
		eq("containers required", spec.IsRequired("containers"), true),
		eq("name required", container.IsRequired("name"), true),
		eq("Pod kind extension", pod.GetExtensions()[extGVK] != nil, true),
	)
	if msg != "" {
		t.Error(msg)
	}
}

func resolve(t *testing.T, s proto.Schema) proto.Schema {
	t.Helper()
	for {
		ref, ok := s.(proto.Reference)
		if !ok {
			return s
		}
		s = ref.SubSchema()
		if s == nil {
			t.Fatalf("dangling reference %s", ref.Reference())
		}
	}
}

// TestKubectlClientSideValidation runs the validator kubectl falls back to
// when the server lacks field validation: valid objects pass, objects
// missing required fields or carrying unknown ones do not.
func TestKubectlClientSideValidation(t *testing.T) {
	_, dc := serveDocs(t)
	models := v2Models(t, dc)
	tests := []struct {
		name, model, manifest string
		wantErr               string
	}{
		{"a full deployment is accepted", "io.k8s.api.apps.v1.Deployment", deploymentYAML, ""},
		{"a pod with resources, ports by name and probes is accepted", "io.k8s.api.core.v1.Pod", podYAML, ""},
		{"a container without a name is rejected", "io.k8s.api.core.v1.Pod",
			strings.Replace(podYAML, "  - name: web\n    image: nginx", "  - image: nginx", 1), `missing required field "name"`},
		{"an unknown field is rejected", "io.k8s.api.core.v1.Pod",
			strings.Replace(podYAML, "image: nginx", "image: nginx\n    imagee: typo", 1), `unknown field "imagee"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tt.manifest), &obj); err != nil {
				t.Fatal(err)
			}
			errs := validation.ValidateModel(obj, models.LookupModel(tt.model), tt.model)
			got := ""
			for _, e := range errs {
				got += e.Error() + "\n"
			}
			if (tt.wantErr == "") != (got == "") || !strings.Contains(got, tt.wantErr) {
				t.Fatalf("validation errors:\n%s\nwant %q", got, tt.wantErr)
			}
		})
	}
}

// TestKubectlExplainFindsKindsInV3 follows kubectl explain's v3 path: the
// index, the group-version document through its hashed URL, the operation
// that names the kind, the component schema carrying that kind, and then
// the field path through allOf-wrapped references.
func TestKubectlExplainFindsKindsInV3(t *testing.T) {
	_, dc := serveDocs(t)
	root := openapi3.NewRoot(dc.OpenAPIV3())
	tests := []struct {
		name   string
		gvk    schema.GroupVersionKind
		path   string
		fields []string
		want   string
	}{
		{"pod.spec.containers.image", corev1.SchemeGroupVersion.WithKind("Pod"), "/api/v1/namespaces/{namespace}/pods",
			[]string{"spec", "containers", "image"}, "Container image name."},
		{"deployment.spec.template.spec.containers.ports.containerPort", appsv1.SchemeGroupVersion.WithKind("Deployment"),
			"/apis/apps/v1/namespaces/{namespace}/deployments",
			[]string{"spec", "template", "spec", "containers", "ports", "containerPort"}, "Number of port to expose"},
		{"node.status.capacity", corev1.SchemeGroupVersion.WithKind("Node"), "/api/v1/nodes",
			[]string{"status", "capacity"}, "Capacity represents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := root.GVSpec(tt.gvk.GroupVersion())
			if err != nil {
				t.Fatalf("GVSpec: %v", err)
			}
			p, ok := doc.Paths.Paths[tt.path]
			if !ok || p.Get == nil || !eqGVK(p.Get.Extensions[extGVK], tt.gvk) {
				t.Fatalf("no GET on %s naming %v", tt.path, tt.gvk)
			}
			var s *spec.Schema
			for _, c := range doc.Components.Schemas {
				if kinds, _ := c.Extensions[extGVK].([]any); len(kinds) == 1 && eqGVK(kinds[0], tt.gvk) {
					s = c
				}
			}
			if s == nil {
				t.Fatalf("no component schema carries %v", tt.gvk)
			}
			for _, f := range tt.fields {
				next, ok := deref3(t, doc.Components.Schemas, s).Properties[f]
				if !ok {
					t.Fatalf("no field %s", f)
				}
				s = &next
			}
			if !strings.HasPrefix(s.Description, tt.want) {
				t.Errorf("description %q does not start with %q", s.Description, tt.want)
			}
		})
	}
}

// deref3 resolves $refs, allOf wrappers and array items down to the object
// whose properties explain lists.
func deref3(t *testing.T, schemas map[string]*spec.Schema, s *spec.Schema) *spec.Schema {
	t.Helper()
	for range 10 {
		switch {
		case s.Ref.String() != "":
			s = schemas[refName(s.Ref.String())]
		case len(s.AllOf) == 1:
			s = &s.AllOf[0]
		case s.Items != nil && s.Items.Schema != nil:
			s = s.Items.Schema
		default:
			return s
		}
		if s == nil {
			t.Fatal("dangling reference")
		}
	}
	t.Fatal("reference chain too long")
	return nil
}

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
  annotations: {note: "x"}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 1}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
        ports:
        - containerPort: 80
        resources:
          limits: {cpu: 500m, memory: 128Mi}
          requests: {cpu: 0.1}
`

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  creationTimestamp: "2024-01-01T00:00:00Z"
spec:
  containers:
  - name: web
    image: nginx
    ports:
    - name: http
      containerPort: 8080
      protocol: TCP
    readinessProbe:
      httpGet: {path: /, port: http}
    env:
    - name: A
      value: "1"
  volumes:
  - name: data
    emptyDir: {sizeLimit: 1Gi}
`
