package openapi

import (
	"sort"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/yaml"
)

// opsByPath lists "<method> <operationId> <action>" per path of the v3
// document of a group-version.
func opsByPath(t *testing.T, d *Documents, gv string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for path, p := range v3Doc(t, d, gv).Paths.Paths {
		if p.Get != nil {
			out[path] = append(out[path], "get "+p.Get.OperationId+" "+action(p.Get.Extensions))
		}
		if p.Post != nil {
			out[path] = append(out[path], "post "+p.Post.OperationId+" "+action(p.Post.Extensions))
		}
		if p.Put != nil {
			out[path] = append(out[path], "put "+p.Put.OperationId+" "+action(p.Put.Extensions))
		}
		if p.Patch != nil {
			out[path] = append(out[path], "patch "+p.Patch.OperationId+" "+action(p.Patch.Extensions))
		}
		if p.Delete != nil {
			out[path] = append(out[path], "delete "+p.Delete.OperationId+" "+action(p.Delete.Extensions))
		}
		sort.Strings(out[path])
	}
	return out
}

func action(ext map[string]any) string {
	s, _ := ext[extAction].(string)
	return s
}

func TestPathsOfferTheOperationsOfEachVerb(t *testing.T) {
	apps := appsv1.SchemeGroupVersion
	readOnly := res(apps, "Deployment", "deployments", true, &appsv1.Deployment{}, &appsv1.DeploymentList{})
	readOnly.Verbs = []string{"get", "list"}
	tests := []struct {
		name      string
		resources []Resource
		path      string
		want      []string
	}{
		{"collection of a namespaced resource lists, creates and deletes the collection", builtinResources(),
			"/apis/apps/v1/namespaces/{namespace}/deployments", []string{
				"delete deleteAppsV1CollectionNamespacedDeployment deletecollection",
				"get listAppsV1NamespacedDeployment list",
				"post createAppsV1NamespacedDeployment post",
			}},
		{"item of a namespaced resource reads, replaces, patches and deletes", builtinResources(),
			"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", []string{
				"delete deleteAppsV1NamespacedDeployment delete",
				"get readAppsV1NamespacedDeployment get",
				"patch patchAppsV1NamespacedDeployment patch",
				"put replaceAppsV1NamespacedDeployment put",
			}},
		{"namespaced resources can be listed across namespaces", builtinResources(),
			"/apis/apps/v1/deployments", []string{"get listAppsV1DeploymentForAllNamespaces list"}},
		{"scale subresource reads, replaces and patches", builtinResources(),
			"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", []string{
				"get readAppsV1NamespacedDeploymentScale get",
				"patch patchAppsV1NamespacedDeploymentScale patch",
				"put replaceAppsV1NamespacedDeploymentScale put",
			}},
		{"verbs limit the operations", []Resource{readOnly},
			"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", []string{"get readAppsV1NamespacedDeployment get"}},
		{"discovery root lists the group-version's resources", builtinResources(),
			"/apis/apps/v1/", []string{"get getAppsV1APIResources "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Build(tt.resources, "t", "v")
			if err != nil {
				t.Fatal(err)
			}
			if msg := eq(tt.path, opsByPath(t, d, "apis/apps/v1")[tt.path], tt.want); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestOperationsCarryKindsAndQueryParameters(t *testing.T) {
	d := buildDocs(t)
	core := v3Doc(t, d, "api/v1").Paths.Paths
	apps := v3Doc(t, d, "apis/apps/v1").Paths.Paths
	paramNames := func(ps []*spec3.Parameter) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"list takes the list and watch parameters", paramNames(core["/api/v1/namespaces/{namespace}/pods"].Get.Parameters),
			[]string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds", "watch"}},
		{"patch takes dryRun, fieldManager, fieldValidation and force", paramNames(core["/api/v1/namespaces/{namespace}/pods/{name}"].Patch.Parameters),
			[]string{"dryRun", "fieldManager", "fieldValidation", "force"}},
		{"create takes fieldValidation", paramNames(core["/api/v1/namespaces/{namespace}/pods"].Post.Parameters),
			[]string{"dryRun", "fieldManager", "fieldValidation"}},
		{"item paths share name, namespace and pretty", paramNames(core["/api/v1/namespaces/{namespace}/pods/{name}"].Parameters),
			[]string{"name", "namespace", "pretty"}},
		{"patch accepts every patch media type", keys(apps["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].Patch.RequestBody.Content),
			[]string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}},
		{"status operations carry the parent's kind", apps["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"].Patch.Extensions[extGVK],
			map[string]any{"group": "apps", "kind": "Deployment", "version": "v1"}},
		{"scale operations carry autoscaling/v1 Scale", apps["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"].Get.Extensions[extGVK],
			map[string]any{"group": "autoscaling", "kind": "Scale", "version": "v1"}},
		{"list responds with the list kind", apps["/apis/apps/v1/namespaces/{namespace}/deployments"].Get.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String(),
			"#/components/schemas/io.k8s.api.apps.v1.DeploymentList"},
		{"pod logs are plain text", core["/api/v1/namespaces/{namespace}/pods/{name}/log"].Get.Responses.StatusCodeResponses[200].Content["text/plain"].Schema.Type[0],
			"string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if msg := eq("value", tt.got, tt.want); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestKubectlDetectsServerSideFieldValidation applies the check kubectl's
// query-parameter verifiers make: the PATCH operation carrying the object's
// group-version-kind must list fieldValidation among its own parameters,
// in v3 and in the v2 protobuf document alike.
func TestKubectlDetectsServerSideFieldValidation(t *testing.T) {
	d := buildDocs(t)
	pb, err := d.v2.variants[mediaV2ProtoAt].body.get()
	if err != nil {
		t.Fatal(err)
	}
	v2doc := &openapiv2.Document{}
	if err := proto.Unmarshal(pb, v2doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range builtinResources() {
		t.Run(r.GVK.String(), func(t *testing.T) {
			if !v3PatchHasParam(t, d, r.GVK, "fieldValidation") {
				t.Error("v3: no PATCH operation of this kind lists fieldValidation")
			}
			if !v2PatchHasParam(t, v2doc, r.GVK, "fieldValidation") {
				t.Error("v2: no PATCH operation of this kind lists fieldValidation")
			}
		})
	}
}

func v3PatchHasParam(t *testing.T, d *Documents, gvk schema.GroupVersionKind, name string) bool {
	doc := v3Doc(t, d, gvPath(gvk.GroupVersion()))
	found := false
	for _, p := range doc.Paths.Paths {
		if p.Patch == nil || !eqGVK(p.Patch.Extensions[extGVK], gvk) {
			continue
		}
		has := false
		for _, param := range p.Patch.Parameters {
			has = has || (param.Name == name && param.In == "query")
		}
		if !has {
			return false
		}
		found = true
	}
	return found
}

func v2PatchHasParam(t *testing.T, doc *openapiv2.Document, gvk schema.GroupVersionKind, name string) bool {
	found := false
	for _, p := range doc.GetPaths().GetPath() {
		patch := p.GetValue().GetPatch()
		if patch == nil || !v2HasGVK(t, patch.GetVendorExtension(), gvk) {
			continue
		}
		has := false
		for _, param := range patch.GetParameters() {
			has = has || param.GetParameter().GetNonBodyParameter().GetQueryParameterSubSchema().GetName() == name
		}
		if !has {
			return false
		}
		found = true
	}
	return found
}

func v2HasGVK(t *testing.T, exts []*openapiv2.NamedAny, gvk schema.GroupVersionKind) bool {
	for _, e := range exts {
		if e.GetName() != extGVK {
			continue
		}
		var v map[string]string
		if err := yaml.Unmarshal([]byte(e.GetValue().GetYaml()), &v); err != nil {
			t.Fatalf("extension %q: %v", e.GetValue().GetYaml(), err)
		}
		return v["group"] == gvk.Group && v["version"] == gvk.Version && v["kind"] == gvk.Kind
	}
	return false
}

func eqGVK(v any, gvk schema.GroupVersionKind) bool {
	m, ok := v.(map[string]any)
	return ok && m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
