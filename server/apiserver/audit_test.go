package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/audit"
	"skiff/server/auth"
	"skiff/store"
)

// eventLog is an audit sink keeping every event as its JSON says, as a
// log reader would see it.
type eventLog struct {
	mu     sync.Mutex
	events []audit.Event
}

func (l *eventLog) ProcessEvent(ev *audit.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var c audit.Event
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, c)
	return nil
}

// of returns the events of one request, in order.
func (l *eventLog) of(id string) []audit.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []audit.Event
	for _, ev := range l.events {
		if string(ev.AuditID) == id {
			out = append(out, ev)
		}
	}
	return out
}

func stages(evs []audit.Event) []audit.Stage {
	var out []audit.Stage
	for _, ev := range evs {
		out = append(out, ev.Stage)
	}
	return out
}

func mustPolicy(t *testing.T, doc string) *audit.Policy {
	t.Helper()
	p, _, err := audit.ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\n" + doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type auditHarness struct {
	srv *httptest.Server
	log *eventLog
}

func newAuditHarness(t *testing.T, policy string, authn apiserver.Authenticator, admission func(store.Store) []apiserver.Admitter) *auditHarness {
	t.Helper()
	l := &eventLog{}
	if authn == nil {
		authn = testAdmin{}
	}
	s := apitest.Start(t, apitest.Options{Authenticator: authn, AuditPolicy: mustPolicy(t, policy), AuditSink: l, Admission: admission})
	srv := httptest.NewServer(s.API.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return &auditHarness{srv: srv, log: l}
}

// do sends a request and returns the response's code, body and Audit-Id.
func (h *auditHarness) do(t *testing.T, method, path, body string, header http.Header) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Audit-Id")
}

const cmBody = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"default"},"data":{"k":"v"}}`

func TestAudit_Create_WritesRequestReceivedAndResponseCompleteAtTheLevel(t *testing.T) {
	for _, tt := range []struct {
		level     audit.Level
		req, resp bool
	}{
		{level: audit.LevelMetadata},
		{level: audit.LevelRequest, req: true},
		{level: audit.LevelRequestResponse, req: true, resp: true},
	} {
		t.Run(string(tt.level), func(t *testing.T) {
			h := newAuditHarness(t, "rules:\n- level: "+string(tt.level)+"\n  resources: [{resources: [configmaps, namespaces]}]\n", nil, nil)
			h.do(t, http.MethodPost, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}`, nil)
			code, out, id := h.do(t, http.MethodPost, "/api/v1/namespaces/default/configmaps", cmBody, nil)
			if code != http.StatusCreated || id == "" {
				t.Fatalf("create: %d %s (Audit-Id %q)", code, out, id)
			}
			evs := h.log.of(id)
			if got := stages(evs); len(got) != 2 || got[0] != audit.StageRequestReceived || got[1] != audit.StageResponseComplete {
				t.Fatalf("stages %v, want RequestReceived, ResponseComplete", got)
			}
			recv, done := evs[0], evs[1]
			for _, ev := range evs {
				if ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" || ev.Level != tt.level || ev.Verb != "create" ||
					ev.User.Username != "admin" || ev.RequestURI != "/api/v1/namespaces/default/configmaps" || len(ev.SourceIPs) == 0 {
					t.Errorf("%s event %+v", ev.Stage, ev)
				}
			}
			if recv.RequestObject != nil || recv.ResponseStatus != nil {
				t.Errorf("RequestReceived carries what was not known yet: %+v", recv)
			}
			if r := done.ObjectRef; r == nil || r.Resource != "configmaps" || r.Namespace != "default" || r.Name != "cm" || r.APIVersion != "v1" {
				t.Errorf("objectRef %+v", done.ObjectRef)
			}
			if done.ResponseStatus == nil || done.ResponseStatus.Code != http.StatusCreated {
				t.Errorf("responseStatus %+v", done.ResponseStatus)
			}
			if (done.RequestObject != nil) != tt.req || (done.ResponseObject != nil) != tt.resp {
				t.Errorf("requestObject %s\nresponseObject %s", done.RequestObject, done.ResponseObject)
			}
			if tt.req && !strings.Contains(string(done.RequestObject), `"data":{"k":"v"}`) {
				t.Errorf("requestObject %s, want the body sent", done.RequestObject)
			}
			if tt.resp && !strings.Contains(string(done.ResponseObject), `"uid":`) {
				t.Errorf("responseObject %s, want the stored object", done.ResponseObject)
			}
			if done.Annotations["authorization.k8s.io/decision"] != "allow" {
				t.Errorf("annotations %v, want the authorization decision", done.Annotations)
			}
			if !done.StageTimestamp.After(recv.StageTimestamp.Time) && !done.StageTimestamp.Equal(&recv.StageTimestamp) {
				t.Errorf("timestamps %v then %v", recv.StageTimestamp, done.StageTimestamp)
			}
		})
	}
}

func TestAudit_EveryResponse_CarriesTheAuditID(t *testing.T) {
	h := newAuditHarness(t, "rules:\n- level: None\n  nonResourceURLs: [\"/version\"]\n- level: Metadata\n", nil, nil)
	code, _, id := h.do(t, http.MethodGet, "/version", "", nil)
	if code != http.StatusOK || id == "" {
		t.Fatalf("/version: %d, Audit-Id %q", code, id)
	}
	if evs := h.log.of(id); len(evs) != 0 {
		t.Errorf("a request at level None was logged: %+v", evs)
	}
	_, _, id = h.do(t, http.MethodGet, "/api/v1/namespaces/default/configmaps/missing", "", http.Header{"Audit-Id": {"client-chosen"}})
	if id != "client-chosen" {
		t.Errorf("Audit-Id %q, want the client's", id)
	}
	evs := h.log.of("client-chosen")
	if len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	st := evs[1].ResponseStatus
	if st == nil || st.Code != http.StatusNotFound || st.Reason != "NotFound" || !strings.Contains(st.Message, "missing") {
		t.Errorf("responseStatus %+v, want the NotFound Status", st)
	}
	if evs[1].ObjectRef == nil || evs[1].ObjectRef.Name != "missing" || evs[1].Verb != "get" {
		t.Errorf("event %+v", evs[1])
	}
}

func TestAudit_Watch_WritesResponseStarted(t *testing.T) {
	h := newAuditHarness(t, "omitStages: [RequestReceived]\nrules:\n- level: Request\n", nil, nil)
	code, _, id := h.do(t, http.MethodGet, "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", "", nil)
	if code != http.StatusOK {
		t.Fatalf("watch: %d", code)
	}
	evs := h.log.of(id)
	if got := stages(evs); len(got) != 2 || got[0] != audit.StageResponseStarted || got[1] != audit.StageResponseComplete {
		t.Fatalf("stages %v, want ResponseStarted, ResponseComplete (RequestReceived omitted)", got)
	}
	if evs[0].Verb != "watch" || evs[0].ResponseStatus == nil || evs[0].ResponseStatus.Code != http.StatusOK {
		t.Errorf("ResponseStarted %+v", evs[0])
	}
}

func TestAudit_Impersonation_RecordsBothUsers(t *testing.T) {
	h := newAuditHarness(t, "rules:\n- level: Metadata\n", nil, nil)
	_, _, id := h.do(t, http.MethodGet, "/api/v1/namespaces", "", http.Header{"Impersonate-User": {"bob"}, "Impersonate-Group": {"devs"}})
	evs := h.log.of(id)
	if len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	done := evs[1]
	if done.User.Username != "admin" || done.ImpersonatedUser == nil || done.ImpersonatedUser.Username != "bob" ||
		len(done.ImpersonatedUser.Groups) == 0 || done.ImpersonatedUser.Groups[0] != "devs" {
		t.Errorf("user %+v, impersonated %+v", done.User, done.ImpersonatedUser)
	}
}

type refuseAll struct{}

func (refuseAll) Authenticate(*http.Request) (*auth.User, error) { return nil, errors.New("bad token") }

func TestAudit_RefusedCredentials_LoggedWithoutAUser(t *testing.T) {
	h := newAuditHarness(t, "rules:\n- level: Metadata\n  users: [admin]\n- level: RequestResponse\n", refuseAll{}, nil)
	code, _, id := h.do(t, http.MethodGet, "/api/v1/pods", "", nil)
	if code != http.StatusUnauthorized || id == "" {
		t.Fatalf("%d, Audit-Id %q", code, id)
	}
	evs := h.log.of(id)
	if len(evs) != 1 || evs[0].Stage != audit.StageResponseStarted || evs[0].Level != audit.LevelRequestResponse {
		t.Fatalf("events %+v, want one at ResponseStarted (upstream's failed-authentication event)", evs)
	}
	if st := evs[0].ResponseStatus; evs[0].User.Username != "" || st == nil || st.Code != http.StatusUnauthorized || st.Reason != "Unauthorized" {
		t.Errorf("event %+v", evs[0])
	}
}

// panicker is an admission plugin that panics on one object.
type panicker struct{}

func (panicker) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	if cm, ok := a.Object.(*corev1.ConfigMap); ok && cm.Name == "boom" {
		panic("kaboom")
	}
	return nil
}

func TestAudit_HandlerPanics_WritesPanicStage(t *testing.T) {
	h := newAuditHarness(t, "rules:\n- level: Metadata\n", nil, func(store.Store) []apiserver.Admitter { return []apiserver.Admitter{panicker{}} })
	h.do(t, http.MethodPost, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}`, nil)
	code, _, id := h.do(t, http.MethodPost, "/api/v1/namespaces/default/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"boom"}}`, nil)
	if code != http.StatusInternalServerError {
		t.Fatalf("code %d, want 500", code)
	}
	evs := h.log.of(id)
	if got := stages(evs); len(got) != 2 || got[1] != audit.StagePanic {
		t.Fatalf("stages %v, want RequestReceived, Panic", got)
	}
	if st := evs[1].ResponseStatus; st == nil || st.Code != 500 || !strings.Contains(st.Message, "kaboom") || evs[1].ObjectRef.Name != "boom" {
		t.Errorf("panic event %+v", evs[1])
	}
}

func TestAudit_OmitManagedFields_DropsThemFromBodies(t *testing.T) {
	h := newAuditHarness(t, "omitManagedFields: true\nrules:\n- level: RequestResponse\n", nil, nil)
	h.do(t, http.MethodPost, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}`, nil)
	code, out, id := h.do(t, http.MethodPost, "/api/v1/namespaces/default/configmaps?fieldManager=me", cmBody, nil)
	if code != http.StatusCreated || !strings.Contains(out, "managedFields") {
		t.Fatalf("create: %d %s (the response itself keeps managedFields)", code, out)
	}
	evs := h.log.of(id)
	if len(evs) != 2 || evs[1].ResponseObject == nil || strings.Contains(string(evs[1].ResponseObject), "managedFields") {
		t.Errorf("events %+v", evs)
	}
}

func TestAudit_ProtobufBodies_LoggedAsJSON(t *testing.T) {
	h := newAuditHarness(t, "rules:\n- level: RequestResponse\n  resources: [{resources: [configmaps]}]\n", nil, nil)
	h.do(t, http.MethodPost, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}`, nil)
	const pb = "application/vnd.kubernetes.protobuf"
	c := kubernetes.NewForConfigOrDie(&rest.Config{Host: h.srv.URL, ContentConfig: rest.ContentConfig{ContentType: pb, AcceptContentTypes: pb}})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "proto"}, Data: map[string]string{"k": "v"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var done *audit.Event
	h.log.mu.Lock()
	for i := range h.log.events {
		if ev := &h.log.events[i]; ev.Stage == audit.StageResponseComplete && ev.Verb == "create" {
			done = ev
		}
	}
	h.log.mu.Unlock()
	if done == nil || done.ObjectRef.Name != "proto" {
		t.Fatalf("no create event naming the object: %+v", done)
	}
	for what, body := range map[string][]byte{"request": done.RequestObject, "response": done.ResponseObject} {
		if !strings.Contains(string(body), `"kind":"ConfigMap"`) || !strings.Contains(string(body), `"k":"v"`) {
			t.Errorf("%sObject %s, want the ConfigMap as JSON", what, body)
		}
	}
}
