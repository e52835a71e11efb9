package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type memorySink struct {
	mu     sync.Mutex
	events []Event
}

func (m *memorySink) ProcessEvent(ev *Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *ev
	m.events = append(m.events, c)
	return nil
}

func TestEvent_JSON_HasUpstreamFieldNames(t *testing.T) {
	at := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
	rec := NewRecorder(RequestConfig{Level: LevelRequestResponse}, nil, Event{
		AuditID: "6f1a", RequestURI: "/api/v1/namespaces/default/configmaps?fieldManager=kubectl-create", Verb: "create",
		User:             authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
		ImpersonatedUser: &authenticationv1.UserInfo{Username: "bob"},
		SourceIPs:        []string{"10.0.0.1"}, UserAgent: "kubectl/v1.37.2",
		ObjectRef:                &ObjectReference{Resource: "configmaps", Namespace: "default", Name: "cm", APIVersion: "v1"},
		RequestReceivedTimestamp: at, StageTimestamp: at,
	})
	rec.LogRequestObject(json.RawMessage(`{"kind":"ConfigMap","metadata":{"name":"cm"}}`), false)
	rec.SetResponseCode(201)
	rec.LogResponseObject(json.RawMessage(`{"kind":"ConfigMap","metadata":{"name":"cm","uid":"u1"}}`), false)
	rec.AddAnnotation("authorization.k8s.io/decision", "allow")
	ev := rec.Event()
	ev.Stage = StageResponseComplete
	b, err := json.Marshal(&ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"6f1a","stage":"ResponseComplete",` +
		`"requestURI":"/api/v1/namespaces/default/configmaps?fieldManager=kubectl-create","verb":"create",` +
		`"user":{"username":"alice","groups":["system:authenticated"]},"impersonatedUser":{"username":"bob"},` +
		`"sourceIPs":["10.0.0.1"],"userAgent":"kubectl/v1.37.2",` +
		`"objectRef":{"resource":"configmaps","namespace":"default","name":"cm","apiVersion":"v1"},` +
		`"responseStatus":{"metadata":{},"code":201},` +
		`"requestObject":{"kind":"ConfigMap","metadata":{"name":"cm"}},` +
		`"responseObject":{"kind":"ConfigMap","metadata":{"name":"cm","uid":"u1"}},` +
		`"requestReceivedTimestamp":"2026-01-02T03:04:05.123456Z","stageTimestamp":"2026-01-02T03:04:05.123456Z",` +
		`"annotations":{"authorization.k8s.io/decision":"allow"}}`
	if string(b) != want {
		t.Errorf("event JSON\n got %s\nwant %s", b, want)
	}
}

func TestRecorder_Levels_KeepOnlyTheirBodies(t *testing.T) {
	body := json.RawMessage(`{"metadata":{"name":"cm","namespace":"ns","uid":"u","resourceVersion":"7","managedFields":[{"manager":"kubectl"}]}}`)
	status := json.RawMessage(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"nope","reason":"Conflict","code":409}`)
	for _, tt := range []struct {
		level         Level
		req, resp     bool
		omitManaged   bool
		wantManagedIn bool
	}{
		{level: LevelMetadata},
		{level: LevelRequest, req: true, wantManagedIn: true},
		{level: LevelRequestResponse, req: true, resp: true, wantManagedIn: true},
		{level: LevelRequestResponse, req: true, resp: true, omitManaged: true},
	} {
		t.Run(string(tt.level), func(t *testing.T) {
			rec := NewRecorder(RequestConfig{Level: tt.level, OmitManagedFields: tt.omitManaged}, nil, Event{ObjectRef: &ObjectReference{Resource: "configmaps"}})
			rec.LogRequestObject(body, false)
			rec.LogResponseObject(body, false)
			ev := rec.Event()
			if r := ev.ObjectRef; r.Name != "cm" || r.Namespace != "ns" || r.UID != "u" || r.ResourceVersion != "7" {
				t.Errorf("objectRef %+v: the body's metadata completes it at every level", r)
			}
			if (ev.RequestObject != nil) != tt.req || (ev.ResponseObject != nil) != tt.resp {
				t.Errorf("requestObject %s, responseObject %s", ev.RequestObject, ev.ResponseObject)
			}
			if ev.RequestObject != nil && strings.Contains(string(ev.RequestObject), "managedFields") != tt.wantManagedIn {
				t.Errorf("requestObject %s: managedFields kept = %v", ev.RequestObject, tt.wantManagedIn)
			}
			rec.SetResponseCode(409)
			rec.LogResponseObject(status, false)
			if st := rec.Event().ResponseStatus; st == nil || st.Code != 409 || st.Reason != metav1.StatusReasonConflict || st.Message != "nope" {
				t.Errorf("responseStatus %+v: a Status answer fills it at every level", st)
			}
		})
	}
}

func TestRecorder_Annotations_FirstValueWinsAndLevelsGate(t *testing.T) {
	sink := &memorySink{}
	rec := NewRecorder(RequestConfig{Level: LevelMetadata}, sink, Event{})
	ctx := WithRecorder(context.Background(), rec)
	AddAnnotation(ctx, "a/b", "1")
	AddAnnotation(ctx, "a/b", "2")
	AddAnnotationWithLevel(ctx, "patch/x", "p", LevelRequest)
	AddAnnotation(context.Background(), "ignored/x", "no recorder: no-op")
	if err := rec.ProcessStage(StageResponseComplete); err != nil {
		t.Fatal(err)
	}
	got := sink.events[0].Annotations
	if len(got) != 1 || got["a/b"] != "1" {
		t.Errorf("annotations %v, want only a/b=1", got)
	}
}

func TestRecorder_OmitStages_AreNotWritten(t *testing.T) {
	sink := &memorySink{}
	at := metav1.NewMicroTime(time.Now().Add(-time.Second))
	rec := NewRecorder(RequestConfig{Level: LevelMetadata, OmitStages: []Stage{StageResponseStarted}}, sink, Event{RequestReceivedTimestamp: at})
	for _, s := range []Stage{StageRequestReceived, StageResponseStarted, StageResponseComplete} {
		if err := rec.ProcessStage(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(sink.events) != 2 || sink.events[0].Stage != StageRequestReceived || sink.events[1].Stage != StageResponseComplete {
		t.Fatalf("events %+v", sink.events)
	}
	if !sink.events[0].StageTimestamp.Equal(&at) || !sink.events[1].StageTimestamp.After(at.Time) {
		t.Errorf("stage timestamps %v, %v: RequestReceived's is the received time", sink.events[0].StageTimestamp, sink.events[1].StageTimestamp)
	}
}

func TestNewID_IsAVersion4UUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := NewID(), NewID()
	if !re.MatchString(string(a)) || a == b {
		t.Errorf("ids %q %q", a, b)
	}
}

func readLines(t *testing.T, path string) []Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

func TestLogBackend_WritesJSONLines_AndAppendsAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "audit.log")
	for i := range 2 {
		b, err := OpenLog(LogConfig{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		ev := Event{AuditID: NewID(), Stage: StageResponseComplete, Verb: "get"}
		ev.Kind = "Event"
		if err := b.ProcessEvent(&ev); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.ProcessEvent(&ev); err == nil {
			t.Errorf("round %d: an event after Close was accepted", i)
		}
	}
	evs := readLines(t, path)
	if len(evs) != 2 || evs[0].Verb != "get" || evs[0].AuditID == evs[1].AuditID {
		t.Errorf("events %+v", evs)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 (audit logs hold request bodies)", st.Mode().Perm())
	}
}

func TestLogBackend_Rotation_KeepsMaxBackups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	b, err := OpenLog(LogConfig{Path: path, MaxSizeMB: 1, MaxBackups: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ev := Event{RequestURI: strings.Repeat("x", 10<<10)} // ~10 KiB a line
	const n = 400                                        // ~4 MiB: three rotations
	for range n {
		if err := b.ProcessEvent(&ev); err != nil {
			t.Fatal(err)
		}
	}
	backups, err := b.Backups()
	if err != nil {
		t.Fatal(err)
	}
	if len(backups) != 2 {
		t.Fatalf("backups %v, want 2", backups)
	}
	for _, p := range append(backups, path) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1<<20 {
			t.Errorf("%s is %d bytes, over the 1 MB limit", p, st.Size())
		}
		if !strings.HasPrefix(filepath.Base(p), "audit") || filepath.Ext(p) != ".log" {
			t.Errorf("backup name %s", p)
		}
	}
	total := len(readLines(t, path)) + len(readLines(t, backups[0])) + len(readLines(t, backups[1]))
	t.Logf("%d events: %d in the current file and the two newest backups", n, total)
	if total >= n || total < 150 {
		t.Errorf("%d events kept of %d: the oldest backups should have been removed, the newest kept", total, n)
	}
}

func TestOpenLog_UnwritablePath_IsAnError(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLog(LogConfig{Path: filepath.Join(blocker, "audit.log")}); err == nil {
		t.Error("a log under a regular file opened")
	}
	if _, err := OpenLog(LogConfig{Path: filepath.Join(dir, "a.log"), MaxSizeMB: -1}); err == nil {
		t.Error("a negative max size was accepted")
	}
}

func TestLogBackend_Stdout_WritesTheWriter(t *testing.T) {
	var buf strings.Builder
	b, err := OpenLog(LogConfig{Path: "-", Stdout: &buf})
	if err != nil {
		t.Fatal(err)
	}
	ev := Event{Verb: "list"}
	if err := b.ProcessEvent(&ev); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "\n") || !strings.Contains(buf.String(), `"verb":"list"`) {
		t.Errorf("stdout %q", buf.String())
	}
}
