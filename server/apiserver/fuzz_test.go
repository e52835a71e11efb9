package apiserver_test

// Fuzz targets for the write path: whatever body (and patch type) a client
// sends to create or patch, the API server answers with a proper status and
// never panics. The server is assembled as `skiff server` assembles it
// (registry hooks, storage over SQLite, the admission plugins) and called
// in-process through its handler, so one execution costs a few
// microseconds of decoding plus, for real creates, one SQLite write.
//
// A panic is recovered by the server into a 500 and logged as "panic
// serving request"; the targets capture the server's log to tell a panic
// (and its stack) apart from any other failure.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"skiff/server/admission"
	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/store"
)

// fuzzTarget is one resource the fuzz targets write to.
type fuzzTarget struct {
	path, kind, apiVersion string
	group, plural          string
	sample                 runtime.Object // a valid object, also created for FuzzPatch
}

var fuzzTargets = []fuzzTarget{
	{"/api/v1/namespaces/default/pods", "Pod", "v1", "", "pods", &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "web"}, Finalizers: []string{"example.com/f"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			Env:       []corev1.EnvVar{{Name: "A", Value: "1"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}},
	}},
	{"/api/v1/namespaces/default/services", "Service", "v1", "", "services", &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}},
	}},
	{"/apis/apps/v1/namespaces/default/deployments", "Deployment", "apps/v1", "apps", "deployments", &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		},
	}},
	{"/api/v1/namespaces/default/configmaps", "ConfigMap", "v1", "", "configmaps", &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"a": "b"}},
		Data:       map[string]string{"k": "v"},
		BinaryData: map[string][]byte{"b": {0, 1, 2}},
	}},
}

// Content types a create body may come in; the last one is refused (415).
var createContentTypes = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "", "text/plain"}

// Patch types: JSON patch, merge, strategic merge, server-side apply, and
// one that is refused (415).
var patchContentTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json",
	"application/apply-patch+yaml", "application/json"}

// logCapture keeps the server's error-level log records, so a recovered
// panic (logged with its stack) is visible to the fuzz target.
type logCapture struct {
	mu      sync.Mutex
	records []string
	panics  int
}

func (l *logCapture) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelError
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "\n  %s: %v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, b.String())
	if r.Message == "panic serving request" {
		l.panics++
	}
	return nil
}

// take returns and clears what was logged, and whether a panic was.
func (l *logCapture) take() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out, panicked := strings.Join(l.records, "\n"), l.panics > 0
	l.records, l.panics = nil, 0
	return out, panicked
}

type fuzzAdmin struct{}

func (fuzzAdmin) Authenticate(*http.Request) (*auth.User, error) {
	return &auth.User{Name: "admin", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}, nil
}

// fuzzObjects answers the admission plugins: every service account exists,
// and one priority class ("high") does.
type fuzzObjects struct{}

func (fuzzObjects) ServiceAccount(_ context.Context, namespace, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: "sa-uid"}}
}

func (fuzzObjects) PriorityClass(_ context.Context, name string) *schedulingv1.PriorityClass {
	if name != "high" {
		return nil
	}
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000}
}

func (fuzzObjects) DefaultPriorityClass(context.Context) *schedulingv1.PriorityClass { return nil }

// fuzzServer is the API server as `skiff server` wires it, minus TLS and
// RBAC, over a fresh SQLite store with the default namespace.
type fuzzServer struct {
	h       http.Handler
	log     *logCapture
	reg     *registry.Registry
	objects *storage.Storage
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	_, serviceNet, _ := net.ParseCIDR("10.43.0.0/16")
	logs := &logCapture{}
	alloc := &admission.ServiceAllocator{CIDR: serviceNet, NodePortMin: 30000, NodePortMax: 32767, Log: slog.New(logs)}
	srv := apitest.Start(f, apitest.Options{
		Authenticator: fuzzAdmin{},
		Logger:        slog.New(logs),
		Admission: func(st store.Store) []apiserver.Admitter {
			alloc.Store = st
			return []apiserver.Admitter{
				admission.ServiceAccount{Get: fuzzObjects{}},
				admission.Priority{Get: fuzzObjects{}},
				admission.DefaultTolerations{Seconds: 300},
				alloc,
			}
		},
	})
	// The allocator keeps Service IPs as IPAddress objects, through the
	// server's storage, which exists only once the server does.
	alloc.Objects, alloc.Registry = srv.Storage, srv.Registry
	api, reg, objects := srv.API, srv.Registry, srv.Storage
	s := &fuzzServer{h: api.Handler(), log: logs, reg: reg, objects: objects}
	if code, body := s.do(http.MethodPost, "/api/v1/namespaces", "application/json", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}`)); code != http.StatusCreated {
		f.Fatalf("create namespace default: %d %s", code, body)
	}
	// The harness must reach the success path, or the targets would test
	// error handling only: every sample is accepted in every encoding.
	for _, tg := range fuzzTargets {
		j := encodeJSON(f, tg.sample)
		for ct, body := range map[string][]byte{"application/json": j, "application/yaml": jsonToYAML(f, j), "application/vnd.kubernetes.protobuf": encodeProtobuf(f, tg.sample)} {
			if code, out := s.do(http.MethodPost, tg.path+"?dryRun=All", ct, body); code != http.StatusCreated {
				f.Fatalf("harness: dry-run create of the sample %s as %s: %d %s", tg.kind, ct, code, out)
			}
		}
	}
	return s
}

func (s *fuzzServer) do(method, path, contentType string, body []byte) (int, []byte) {
	rec := s.serve(method, path, contentType, body)
	return rec.Code, rec.Body.Bytes()
}

func (s *fuzzServer) serve(method, path, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec
}

// checkError is the property every response must have: no panic, no
// server error, and an error is a metav1.Status carrying the HTTP code. It
// reports whether the response was an error.
func (s *fuzzServer) checkError(t *testing.T, what string, rec *httptest.ResponseRecorder) bool {
	t.Helper()
	logged, panicked := s.log.take()
	if panicked {
		t.Fatalf("%s: the server panicked (answered %d %s):\n%s", what, rec.Code, rec.Body.Bytes(), logged)
	}
	code, body := rec.Code, rec.Body.Bytes()
	if code >= 500 {
		t.Fatalf("%s: server error %d for a client's input: %s\nserver log:\n%s", what, code, body, logged)
	}
	if code >= 400 {
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: error %d with Content-Type %q, want application/json: %s", what, code, ct, body)
		}
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("%s: error %d body is not a Status: %v: %s", what, code, err, body)
		}
		if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || int(st.Code) != code || st.Message == "" {
			t.Fatalf("%s: error %d body is not a Failure Status with that code and a message: %s", what, code, body)
		}
		return true
	}
	return false
}

// check is checkError, and a success must be wantCode with an object of the
// target's kind in default. It returns the object's metadata on success.
func (s *fuzzServer) check(t *testing.T, what string, rec *httptest.ResponseRecorder, wantCode int, tg fuzzTarget) *metav1.ObjectMeta {
	t.Helper()
	if s.checkError(t, what, rec) {
		return nil
	}
	code, body := rec.Code, rec.Body.Bytes()
	if code != wantCode {
		t.Fatalf("%s: answered %d, want %d or an error status: %s", what, code, wantCode, body)
	}
	var obj struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("%s: success %d body is not an object: %v: %s", what, code, err, body)
	}
	if obj.Kind != tg.kind || obj.APIVersion != tg.apiVersion || obj.Metadata.Name == "" || obj.Metadata.Namespace != "default" {
		t.Fatalf("%s: success %d returned %s %s %s/%s, want a %s %s in default", what, code, obj.APIVersion, obj.Kind,
			obj.Metadata.Namespace, obj.Metadata.Name, tg.apiVersion, tg.kind)
	}
	return &obj.Metadata
}

func encodeJSON(f *testing.F, obj runtime.Object) []byte {
	f.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func encodeProtobuf(f *testing.F, obj runtime.Object) []byte {
	f.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Encode(obj, &buf); err != nil {
		f.Fatal(err)
	}
	return buf.Bytes()
}

func jsonToYAML(f *testing.F, j []byte) []byte {
	f.Helper()
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		f.Fatal(err)
	}
	return y
}

// Bodies every target is seeded with: broken, empty, other kinds, odd YAML.
var commonCreateSeeds = []string{
	``, `null`, `{}`, `[]`, `"x"`, `1e400`, `{"apiVersion":`, `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"w"}}`,
	`{"kind":"ConfigMap","apiVersion":"v2","metadata":{"name":"w"}}`, `{"metadata":{"generateName":"g-"}}`,
	`{"metadata":{"name":"x","namespace":"other"}}`, `{"metadata":{"name":"Not_Valid"}}`, `{"metadata":null}`,
	`{"metadata":{"name":"x","name":"y"}}`, `{"metadata":{"name":"x"},"bogus":1}`,
	`{"metadata":{"name":"x","deletionTimestamp":"2020-01-01T00:00:00Z","finalizers":["a/b"],"resourceVersion":"7","uid":"u"}}`,
	`{"metadata":{"name":"x","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"o","uid":"1","controller":true}],"managedFields":[{"manager":"m","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{"f:a":{}}}]}}`,
	"a: &a [*a, *a]\nb: *a\n", "metadata: {name: x}\n<<: {kind: ConfigMap}\n", "k8s\x00\x0a\x02\x0a\x00",
}

var serviceSeeds = []string{
	`{"metadata":{"name":"h"},"spec":{"clusterIP":"None","ports":[{"port":80}]}}`,
	`{"metadata":{"name":"i"},"spec":{"clusterIP":"10.43.0.1","ports":[{"port":80}]}}`,
	`{"metadata":{"name":"j"},"spec":{"clusterIP":"1.2.3.4","clusterIPs":["1.2.3.4","fd00::1"],"ipFamilies":["IPv4","IPv6"],"ipFamilyPolicy":"RequireDualStack","ports":[{"port":80}]}}`,
	`{"metadata":{"name":"k"},"spec":{"clusterIP":"10.43.255.255","ports":[{"port":80}]}}`,
	`{"metadata":{"name":"l"},"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","healthCheckNodePort":30001,"ports":[{"port":80,"nodePort":30000},{"port":81,"nodePort":30000}]}}`,
	`{"metadata":{"name":"m"},"spec":{"type":"NodePort","ports":[{"port":70000,"nodePort":-1,"targetPort":"x-y-z-too-long-name"}]}}`,
	`{"metadata":{"name":"n"},"spec":{"type":"ExternalName","externalName":"example.com","clusterIP":""}}`,
	`{"metadata":{"name":"o"},"spec":{"type":"Weird","ports":[{"port":80,"protocol":"SCTP","appProtocol":"h2c"}],"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":0}}}}`,
}

var podSeeds = []string{
	`{"metadata":{"name":"q"},"spec":{"containers":[{"name":"c"}]}}`,
	`{"metadata":{"name":"r"},"spec":{"priorityClassName":"high","priority":5,"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1x"},"requests":{"memory":"-1"}}}]}}`,
	`{"metadata":{"name":"s"},"spec":{"priorityClassName":"system-node-critical","nodeName":"n1","tolerations":[{"operator":"Exists"}],"automountServiceAccountToken":false,"containers":[{"name":"c","image":"i","volumeMounts":[{"name":"v","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}]}],"volumes":[{"name":"v","emptyDir":{}}]}}`,
	`{"metadata":{"name":"t","annotations":{"kubernetes.io/config.mirror":"x"}},"spec":{"initContainers":[{"name":"i","image":"i","restartPolicy":"Always"}],"containers":[{"name":"c","image":"i","ports":[{"containerPort":0,"hostPort":99999}],"env":[{"name":"E","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]}],"overhead":{"cpu":"1"},"securityContext":{"sysctls":[{"name":"a..b","value":"1"}]}}}`,
	`{"metadata":{"name":"u"},"spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}],"ephemeralContainers":[{"name":"e","image":"i"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Gt","values":["x"]}]}]}}}}}`,
}

var deploymentSeeds = []string{
	`{"metadata":{"name":"v"},"spec":{"replicas":-1,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"c":"d"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`,
	`{"metadata":{"name":"w"},"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"In"}]},"strategy":{"type":"Recreate","rollingUpdate":{"maxSurge":"200%","maxUnavailable":"x"}},"template":{"spec":{"containers":[]}}}}`,
	`{"metadata":{"name":"x"},"spec":{"replicas":1e100,"revisionHistoryLimit":2147483648,"progressDeadlineSeconds":0,"minReadySeconds":5,"selector":null,"template":null}}`,
}

var configMapSeeds = []string{
	`{"metadata":{"name":"y"},"data":{"bad key!":"v"},"binaryData":{"k":"not base64"}}`,
	`{"metadata":{"name":"z"},"data":{"k":"v"},"binaryData":{"k":"AAEC"},"immutable":true}`,
	`{"metadata":{"name":"big","labels":{"a/b/c":"x","` + strings.Repeat("l", 70) + `":"v"}}}`,
}

func FuzzCreate_NeverPanics(f *testing.F) {
	for i, tg := range fuzzTargets {
		ti := uint8(i)
		j := encodeJSON(f, tg.sample)
		f.Add(ti, uint8(0), true, j)
		f.Add(ti, uint8(0), false, j)
		f.Add(ti, uint8(1), true, jsonToYAML(f, j))
		f.Add(ti, uint8(2), true, encodeProtobuf(f, tg.sample))
		f.Add(ti, uint8(2), false, encodeProtobuf(f, tg.sample))
		f.Add(ti, uint8(4), true, j)
		for _, s := range commonCreateSeeds {
			f.Add(ti, uint8(0), true, []byte(s))
		}
	}
	for i, seeds := range [][]string{podSeeds, serviceSeeds, deploymentSeeds, configMapSeeds} {
		for _, s := range seeds {
			f.Add(uint8(i), uint8(0), false, []byte(s))
			f.Add(uint8(i), uint8(1), true, jsonToYAML(f, []byte(s)))
		}
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, target, contentType uint8, dry bool, body []byte) {
		tg := fuzzTargets[int(target)%len(fuzzTargets)]
		ct := createContentTypes[int(contentType)%len(createContentTypes)]
		path := tg.path
		if dry {
			path += "?dryRun=All"
		}
		what := fmt.Sprintf("create %s (%s, dryRun %v)", tg.kind, ct, dry)
		created := s.check(t, what, s.serve(http.MethodPost, path, ct, body), http.StatusCreated, tg)
		if created == nil || dry {
			return
		}
		// Remove what was created, so the next input starts from the same
		// state (and the same name is free again): through the API, which
		// frees a Service's addresses, then from storage for an object its
		// finalizers keep.
		what = "delete the object of " + what
		del := s.serve(http.MethodDelete, tg.path+"/"+created.Name+"?gracePeriodSeconds=0", "", nil)
		if s.checkError(t, what, del) {
			t.Fatalf("%s: %d %s", what, del.Code, del.Body.Bytes())
		}
		res, ok := s.reg.Lookup(tg.group, "v1", tg.plural)
		if !ok {
			t.Fatalf("%s/%s is not served", tg.group, tg.plural)
		}
		if _, err := s.objects.Delete(context.Background(), res, "default", created.Name, 0); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("%s from storage: %v", what, err)
		}
	})
}

// The patch target patches one valid object of each kind (JSON, merge,
// strategic merge patch and server-side apply), always as a dry run so every
// input sees the same object.
func FuzzPatch_NeverPanics(f *testing.F) {
	patchSeeds := []struct {
		pt   uint8
		body string
	}{
		{0, `[{"op":"add","path":"/metadata/labels/x","value":"y"}]`},
		{0, `[{"op":"replace","path":"/metadata/name","value":"other"}]`},
		{0, `[{"op":"remove","path":"/spec"},{"op":"test","path":"/kind","value":"Pod"}]`},
		{0, `[{"op":"move","from":"/metadata","path":"/metadata/x"},{"op":"copy","from":"/metadata/labels","path":"/metadata/annotations"}]`},
		{0, `[{"op":"add","path":"/metadata/finalizers/-","value":"a/b"},{"op":"add","path":"/metadata/finalizers/99","value":"c"}]`},
		{0, `[{"op":"replace","path":"/metadata/resourceVersion","value":"1"}]`},
		{0, `[{"op":"add","path":"/spec/containers/0/ports/-1","value":{}}]`},
		{0, `[{"op":"bogus"}]`},
		{0, `[{"op":"add","path":"","value":null}]`},
		{0, `{}`},
		{1, `{"metadata":{"labels":{"x":"y"}}}`},
		{1, `{"metadata":{"labels":null,"uid":"other"},"kind":"Secret"}`},
		{1, `{"apiVersion":"v2"}`},
		{1, `{"spec":{"replicas":"three","ports":[{"port":0}],"clusterIP":"10.43.0.9"}}`},
		{1, `null`},
		{1, `[1,2]`},
		{2, `{"metadata":{"$patch":"delete"}}`},
		{2, `{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}`},
		{2, `{"spec":{"$setElementOrder/containers":[{"name":"z"},{"name":"c"}],"containers":[{"name":"z","image":"i"}]}}`},
		{2, `{"spec":{"$retainKeys":["containers"],"template":{"spec":{"$retainKeys":[1]}}}}`},
		{2, `{"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/f"]}}`},
		{2, `{"spec":{"ports":[{"port":80,"$patch":"replace"}],"selector":{"$patch":"replace","x":"y"}}}`},
		{2, `{"data":{"k":null},"binaryData":{"b":"AAAA"}}`},
		{2, `{"$patch":"replace"}`},
		{2, `{"spec":{"template":{"spec":{"containers":[{"$patch":"merge"}]}}}}`},
		{3, "metadata:\n  labels: {x: y}\n"},
		{3, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"},
		{3, "metadata:\n  managedFields: [{manager: m, operation: Apply, fieldsType: FieldsV1, fieldsV1: {f:data: {}}}]\n"},
		{3, "spec: {containers: [{name: c, image: other}], ports: [{port: 80, protocol: TCP}, {port: 80, protocol: TCP}]}\n"},
		{3, "a: &a [*a, *a]\n"},
		{3 | 0x80, "data: {k: forced}\nspec: {replicas: 3}\n"},
		{4, `{"metadata":{"labels":{"x":"y"}}}`},
	}
	for i, tg := range fuzzTargets {
		for _, p := range patchSeeds {
			f.Add(uint8(i), p.pt, []byte(p.body))
		}
		f.Add(uint8(i), uint8(3), jsonToYAML(f, encodeJSON(f, tg.sample)))
	}
	s := newFuzzServer(f)
	names := make([]string, len(fuzzTargets))
	for i, tg := range fuzzTargets {
		code, body := s.do(http.MethodPost, tg.path, "application/json", encodeJSON(f, tg.sample))
		if code != http.StatusCreated {
			f.Fatalf("create the %s to patch: %d %s", tg.kind, code, body)
		}
		names[i] = tg.sample.(metav1.Object).GetName()
		// The harness must reach the success path of every patch type.
		for ct, p := range map[string][]byte{
			"application/json-patch+json":            []byte(`[{"op":"add","path":"/metadata/labels","value":{"fuzz":"1"}}]`),
			"application/merge-patch+json":           []byte(`{"metadata":{"labels":{"fuzz":"1"}}}`),
			"application/strategic-merge-patch+json": []byte(`{"metadata":{"labels":{"fuzz":"1"}}}`),
			"application/apply-patch+yaml":           jsonToYAML(f, encodeJSON(f, tg.sample)),
		} {
			path := tg.path + "/" + names[i] + "?dryRun=All&fieldManager=fuzz&force=true"
			if code, out := s.do(http.MethodPatch, path, ct, p); code != http.StatusOK {
				f.Fatalf("harness: dry-run %s of the sample %s: %d %s", ct, tg.kind, code, out)
			}
		}
	}
	f.Fuzz(func(t *testing.T, target, patchType uint8, body []byte) {
		i := int(target) % len(fuzzTargets)
		tg := fuzzTargets[i]
		// The high bit asks to force an apply (refused for other types).
		pt := patchContentTypes[int(patchType&0x7f)%len(patchContentTypes)]
		path := tg.path + "/" + names[i] + "?dryRun=All&fieldManager=fuzz"
		if patchType&0x80 != 0 {
			path += "&force=true"
		}
		rec := s.serve(http.MethodPatch, path, pt, body)
		s.check(t, fmt.Sprintf("patch %s (%s)", tg.kind, pt), rec, http.StatusOK, tg)
	})
}
