package openapi

import (
	"reflect"
	"slices"
	"sort"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The operations are modelled once and rendered twice, as Swagger 2.0 and as
// OpenAPI 3.0, so that both documents always describe the same API.

type param struct {
	name, in, typ, doc string
	required           bool
}

type response struct {
	code int
	doc  string
	body string // definition name; empty for none
	text bool   // plain text body, as pod logs are
}

type operation struct {
	method       string // get, put, post, patch, delete
	id           string
	action       string // x-kubernetes-action
	doc          string
	gvk          *schema.GroupVersionKind
	params       []param
	body         string // definition name of the request body
	bodyOptional bool
	patch        bool     // the body is one of the patch media types
	patchTypes   []string // the patch media types when not patchMediaTypes()
	consumes     []string // the other bodies' media types when not "*/*"
	watch        bool     // the response can also be a watch stream
	responses    []response
}

type pathItem struct {
	gv     schema.GroupVersion
	path   string
	params []param
	ops    []operation
}

// optionParams are the query parameters of the options types, derived from
// their fields the way upstream's route builder derives them.
type optionParams struct {
	get, list, deleteCollection, create, update, patch, del, log []param
}

func newOptionParams() optionParams {
	list := queryParams(reflect.TypeFor[metav1.ListOptions]())
	del := queryParams(reflect.TypeFor[metav1.DeleteOptions]())
	var collection []param
	for _, p := range list {
		if p.name != "watch" && p.name != "allowWatchBookmarks" {
			collection = append(collection, p)
		}
	}
	return optionParams{
		get:              queryParams(reflect.TypeFor[metav1.GetOptions]()),
		list:             list,
		deleteCollection: sortParams(append(collection, del...)),
		create:           queryParams(reflect.TypeFor[metav1.CreateOptions]()),
		update:           queryParams(reflect.TypeFor[metav1.UpdateOptions]()),
		patch:            queryParams(reflect.TypeFor[metav1.PatchOptions]()),
		del:              del,
		log:              queryParams(reflect.TypeFor[corev1.PodLogOptions]()),
	}
}

// queryParams turns the scalar fields of an options struct into query
// parameters; struct-valued fields (preconditions, sinceTime) cannot be
// passed in a query and are left out, as upstream does.
func queryParams(t reflect.Type) []param {
	docs := swaggerDocs(t)
	var out []param
	for i := range t.NumField() {
		f := t.Field(i)
		jf, ok := jsonFieldOf(f)
		if !ok || jf.inline {
			continue
		}
		ft := deref(f.Type)
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		typ, _, ok := primitiveOf(ft.Kind())
		if !ok {
			continue
		}
		out = append(out, param{name: jf.name, in: "query", typ: typ, doc: docs[jf.name]})
	}
	return sortParams(out)
}

func sortParams(ps []param) []param {
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}

// subresource describes what a known subresource accepts and returns.
type subresource struct {
	object  runtime.Object // nil: the resource's own kind
	gvk     schema.GroupVersionKind
	methods []string
	text    bool
}

// knownSubresource covers the subresources whose shape is fixed by the API;
// connect-style ones (exec, attach, portforward, proxy) are not described.
func knownSubresource(name string) (subresource, bool) {
	rw := []string{"get", "put", "patch"}
	switch name {
	case "status", "ephemeralcontainers", "resize", "approval":
		return subresource{methods: rw}, true
	case "finalize":
		return subresource{methods: []string{"put"}}, true
	case "scale":
		return subresource{object: &autoscalingv1.Scale{}, gvk: autoscalingv1.SchemeGroupVersion.WithKind("Scale"), methods: rw}, true
	case "eviction":
		return subresource{object: &policyv1.Eviction{}, gvk: policyv1.SchemeGroupVersion.WithKind("Eviction"), methods: []string{"post"}}, true
	case "binding":
		return subresource{object: &corev1.Binding{}, gvk: corev1.SchemeGroupVersion.WithKind("Binding"), methods: []string{"post"}}, true
	case "token":
		return subresource{object: &authenticationv1.TokenRequest{}, gvk: authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"), methods: []string{"post"}}, true
	case "log":
		return subresource{methods: []string{"get"}, text: true}, true
	}
	return subresource{}, false
}

// pathBuilder lays out the REST paths of resources.
type pathBuilder struct {
	opts  optionParams
	defOf func(runtime.Object) string
	// custom lays out a CustomResourceDefinition's paths the way upstream's
	// apiextensions server does: every operation, the scale subresource's
	// too, names the custom kind; patches are JSON, merge or apply (no
	// strategic merge); bodies are JSON or YAML; reads take GetOptions.
	custom bool
}

// customPatchTypes are the patches a custom resource accepts.
func customPatchTypes() []string {
	return []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
}

// names of the definitions every group-version refers to.
const (
	statusDef        = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	deleteOptionsDef = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	patchDef         = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
	resourceListDef  = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList"
)

// discovery is the GET on a group-version's root that lists its resources.
func (b pathBuilder) discovery(gv schema.GroupVersion) pathItem {
	return pathItem{gv: gv, path: "/" + gvPath(gv) + "/", ops: []operation{{
		method:    "get",
		id:        "get" + opGroupVersion(gv) + "APIResources",
		doc:       "get available resources",
		responses: ok(resourceListDef),
	}}}
}

// scope is what the paths of one resource share.
type scope struct {
	r      Resource
	n      naming
	kind   string // definition name of the resource's kind
	gvk    schema.GroupVersionKind
	base   string  // path of the collection
	ns     []param // the namespace path parameter, if namespaced
	pretty param
}

func (s scope) itemParams(kind string) []param {
	out := []param{{name: "name", in: "path", typ: "string", doc: "name of the " + kind, required: true}}
	out = append(out, s.ns...)
	return append(out, s.pretty)
}

func (b pathBuilder) scopeOf(r Resource) scope {
	gv := r.GVK.GroupVersion()
	s := scope{r: r, kind: r.definition(b.defOf), gvk: r.GVK, base: "/" + gvPath(gv),
		pretty: param{name: "pretty", in: "query", typ: "string", doc: prettyParamDoc}}
	prefix := ""
	if r.Namespaced {
		prefix, s.base = "Namespaced", s.base+"/namespaces/{namespace}"
		s.ns = []param{{name: "namespace", in: "path", typ: "string", doc: namespaceParamDoc, required: true}}
	}
	s.base += "/" + r.Plural
	s.n = naming{gv: opGroupVersion(gv), scope: prefix, kind: toValidOperationID(r.GVK.Kind, true)}
	return s
}

// resource lays out the collection, item and subresource paths of r.
func (b pathBuilder) resource(r Resource) []pathItem {
	s := b.scopeOf(r)
	gv, gvk := r.GVK.GroupVersion(), &s.gvk
	collection := pathItem{gv: gv, path: s.base, params: append(slices.Clone(s.ns), s.pretty)}
	if r.has("list") {
		collection.ops = append(collection.ops, b.list(s.n.id("list", ""), r, gvk))
	}
	if r.has("create") {
		collection.ops = append(collection.ops, write("post", s.n.id("create", ""), "create a "+r.GVK.Kind, b.opts.create, s.kind, gvk, 200, 201, 202))
	}
	if r.has("deletecollection") {
		collection.ops = append(collection.ops, b.deleteOp(s.n.id("delete", "Collection"), "deletecollection", "delete collection of "+r.GVK.Kind, b.opts.deleteCollection, gvk))
	}
	item := pathItem{gv: gv, path: s.base + "/{name}", params: s.itemParams(r.GVK.Kind), ops: b.itemOps(s)}
	if b.custom {
		collection.ops = b.customize(collection.ops)
		item.ops = b.customize(item.ops)
	}
	items := []pathItem{collection, item}
	if r.Namespaced && r.has("list") {
		all := pathItem{gv: gv, path: "/" + gvPath(gv) + "/" + r.Plural, params: []param{s.pretty}}
		all.ops = []operation{b.list("list"+s.n.gv+s.n.kind+"ForAllNamespaces", r, gvk)}
		items = append(items, all)
	}
	for _, sub := range r.Subresources {
		if p, ok := b.subresource(s, sub); ok {
			if b.custom {
				p.ops = b.customize(p.ops)
			}
			items = append(items, p)
		}
	}
	return items
}

// customize adjusts operations laid out for a built-in to what upstream
// publishes for a custom resource.
func (b pathBuilder) customize(ops []operation) []operation {
	for i := range ops {
		op := &ops[i]
		switch {
		case op.patch:
			op.patchTypes = customPatchTypes()
		case op.body != "":
			op.consumes = []string{"application/json", "application/yaml"}
		}
		if op.method == "get" && op.action == "get" {
			op.params = b.opts.get
		}
	}
	return ops
}

func (b pathBuilder) itemOps(s scope) []operation {
	kindName, gvk := s.r.GVK.Kind, &s.gvk
	var ops []operation
	if s.r.has("get") {
		ops = append(ops, operation{method: "get", id: s.n.id("read", ""), action: "get", doc: "read the specified " + kindName, gvk: gvk, responses: ok(s.kind)})
	}
	if s.r.has("update") {
		ops = append(ops, write("put", s.n.id("replace", ""), "replace the specified "+kindName, b.opts.update, s.kind, gvk, 200, 201))
	}
	if s.r.has("patch") {
		ops = append(ops, b.patchOp(s.n.id("patch", ""), "partially update the specified "+kindName, s.kind, gvk))
	}
	if s.r.has("delete") {
		ops = append(ops, b.deleteOp(s.n.id("delete", ""), "delete", "delete a "+kindName, b.opts.del, gvk))
	}
	return ops
}

func (b pathBuilder) subresource(s scope, name string) (pathItem, bool) {
	sub, known := knownSubresource(name)
	if !known {
		return pathItem{}, false
	}
	kind, gvk := s.kind, s.gvk
	if sub.object != nil {
		kind = b.defOf(sub.object)
		if !b.custom {
			gvk = sub.gvk
		}
	}
	p := pathItem{gv: s.gvk.GroupVersion(), path: s.base + "/{name}/" + name, params: s.itemParams(gvk.Kind)}
	suffix, of := upperFirst(name), name+" of the specified "+s.r.GVK.Kind
	for _, m := range sub.methods {
		switch m {
		case "get":
			op := operation{method: "get", id: s.n.id("read", suffix), action: "get", doc: "read " + of, gvk: &gvk, responses: ok(kind)}
			if sub.text {
				op.params, op.responses = b.opts.log, []response{{code: 200, doc: "OK", text: true}, unauthorized()}
			}
			p.ops = append(p.ops, op)
		case "put":
			p.ops = append(p.ops, write("put", s.n.id("replace", suffix), "replace "+of, b.opts.update, kind, &gvk, 200, 201))
		case "patch":
			p.ops = append(p.ops, b.patchOp(s.n.id("patch", suffix), "partially update "+of, kind, &gvk))
		case "post":
			p.ops = append(p.ops, write("post", s.n.id("create", suffix), "create "+name+" of a "+s.r.GVK.Kind, b.opts.create, kind, &gvk, 200, 201, 202))
		}
	}
	return p, true
}

func (b pathBuilder) list(id string, r Resource, gvk *schema.GroupVersionKind) operation {
	params := b.opts.list
	if !r.has("watch") {
		params = nil
		for _, p := range b.opts.list {
			if p.name != "watch" && p.name != "allowWatchBookmarks" {
				params = append(params, p)
			}
		}
	}
	return operation{method: "get", id: id, action: "list", doc: "list or watch objects of kind " + r.GVK.Kind,
		gvk: gvk, params: params, watch: r.has("watch"), responses: ok(r.listDefinition(b.defOf))}
}

func (b pathBuilder) patchOp(id, doc, kind string, gvk *schema.GroupVersionKind) operation {
	op := write("patch", id, doc, b.opts.patch, kind, gvk, 200, 201)
	op.body, op.patch = patchDef, true
	return op
}

func (b pathBuilder) deleteOp(id, action, doc string, params []param, gvk *schema.GroupVersionKind) operation {
	return operation{method: "delete", id: id, action: action, doc: doc, gvk: gvk, params: params,
		body: deleteOptionsDef, bodyOptional: true, responses: ok(statusDef)}
}

// write is an operation that sends the object and gets it back.
func write(method, id, doc string, params []param, kind string, gvk *schema.GroupVersionKind, codes ...int) operation {
	op := operation{method: method, id: id, action: method, doc: doc, gvk: gvk, params: params, body: kind}
	for _, c := range codes {
		op.responses = append(op.responses, response{code: c, doc: httpText(c), body: kind})
	}
	op.responses = append(op.responses, unauthorized())
	return op
}

func ok(body string) []response {
	return []response{{code: 200, doc: "OK", body: body}, unauthorized()}
}

func unauthorized() response { return response{code: 401, doc: "Unauthorized"} }

func httpText(code int) string {
	switch code {
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	}
	return "OK"
}

// naming builds operation ids such as "patchAppsV1NamespacedDeploymentScale".
type naming struct{ gv, scope, kind string }

func (n naming) id(verb, suffix string) string {
	if suffix == "Collection" {
		return verb + n.gv + suffix + n.scope + n.kind
	}
	return verb + n.gv + n.scope + n.kind + suffix
}
