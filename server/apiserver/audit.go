package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/yaml"

	"skiff/server/audit"
	"skiff/server/auth"
)

const (
	// statusCaptureBytes is how much of a response is kept to read a
	// Status from when the body itself is not logged.
	statusCaptureBytes = 64 << 10
	// responseCaptureBytes bounds a logged response body (RequestResponse);
	// a larger one is left out of the event.
	responseCaptureBytes = 16 << 20
	maxUserAgentLength   = 1024
)

type receivedKey struct{}

// auditInit gives every request its audit ID, the client's Audit-ID
// header or a new one, and echoes it in the response, audited or not, as
// upstream's WithAuditInit.
func (s *Server) auditInit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := audit.NewID()
		if h := r.Header.Get(audit.HeaderAuditID); h != "" {
			id = types.UID(h)
		}
		if w.Header().Get(audit.HeaderAuditID) == "" {
			w.Header().Set(audit.HeaderAuditID, string(id))
		}
		ctx := context.WithValue(audit.WithID(r.Context(), id), receivedKey{}, time.Now())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (s *Server) auditing() bool { return s.cfg.AuditPolicy != nil && s.cfg.AuditSink != nil }

// audit records the request as the audit policy says: RequestReceived
// before it is handled, ResponseStarted when a long-running response
// starts, ResponseComplete (or Panic) at the end. It runs right after
// authentication, as upstream's WithAudit: the user is known, and what
// impersonation, authorization and admission decide lands in the event.
func (s *Server) audit(next http.Handler) http.Handler {
	if !s.auditing() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, info := s.auditRecorder(r, auth.UserFrom(r.Context()))
		if rec == nil {
			next.ServeHTTP(w, r)
			return
		}
		r = r.WithContext(audit.WithRecorder(r.Context(), rec))
		if err := rec.ProcessStage(audit.StageRequestReceived); err != nil {
			s.log.Error("audit: cannot write event", "err", err)
			writeError(w, r, apierrors.NewInternalError(errors.New("failed to store audit event")))
			return
		}
		long := longRunning(info)
		aw := &auditWriter{ResponseWriter: w, rec: rec, long: long, log: s.log}
		switch {
		case long: // a stream is never logged; its first write may be a Status (Write)
		case !rec.Level().Less(audit.LevelRequestResponse):
			aw.limit = responseCaptureBytes
		default:
			aw.limit = statusCaptureBytes
		}
		var body *capturedBody
		if info.Resource && !long && r.Body != nil && r.Body != http.NoBody && methodHasBody(r.Method) {
			body = &capturedBody{ReadCloser: r.Body, limit: s.cfg.MaxBodyBytes}
			r.Body = body
		}
		defer func() {
			if body != nil && !body.over {
				rec.LogRequestObject(s.auditJSON(r.Header.Get("Content-Type"), body.buf.Bytes()), r.Method == http.MethodPatch)
			}
			if p := recover(); p != nil {
				rec.SetResponseStatus(&metav1.Status{Code: http.StatusInternalServerError, Status: metav1.StatusFailure,
					Reason: metav1.StatusReasonInternalError, Message: fmt.Sprintf("APIServer panic'd: %v", p)})
				aw.process(audit.StagePanic)
				panic(p) // recoverPanics answers the client
			}
			aw.finish(s)
		}()
		next.ServeHTTP(aw, r)
	})
}

// auditUnauthorized returns the writer to answer a request whose
// credentials were refused with: its event (one, at ResponseStarted, with
// no user) is written when the 401 goes out, as upstream's
// WithFailedAuthenticationAudit.
func (s *Server) auditUnauthorized(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if !s.auditing() {
		return w
	}
	rec, _ := s.auditRecorder(r, nil)
	if rec == nil {
		return w
	}
	// The 401 Status the writer sees becomes the response status.
	return &auditWriter{ResponseWriter: w, rec: rec, long: true, log: s.log}
}

// auditRecorder evaluates the policy for the request; nil when it is not
// audited.
func (s *Server) auditRecorder(r *http.Request, u *auth.User) (*audit.Recorder, requestInfo) {
	info := parseRequest(r)
	a := attributes(u, info)
	if a.ResourceRequest && a.Name == "" && (a.Verb == "list" || a.Verb == "watch") {
		a.Name = nameFromFieldSelector(r) // as authorize: upstream's request info does this
	}
	var user *authenticationv1.UserInfo
	if u != nil {
		ui := userInfo(u) // reviews.go
		user = &ui
	}
	cfg := s.cfg.AuditPolicy.Evaluate(audit.Attributes{User: user, Verb: a.Verb, ResourceRequest: a.ResourceRequest, Path: a.Path,
		APIGroup: a.APIGroup, APIVersion: a.APIVersion, Namespace: a.Namespace, Resource: a.Resource, Subresource: a.Subresource, Name: a.Name})
	if cfg.Level == audit.LevelNone || cfg.Level == "" {
		return nil, info
	}
	received, ok := r.Context().Value(receivedKey{}).(time.Time)
	if !ok {
		received = time.Now()
	}
	ev := audit.Event{AuditID: audit.IDFrom(r.Context()), RequestURI: r.URL.RequestURI(), Verb: a.Verb,
		UserAgent: userAgent(r), RequestReceivedTimestamp: metav1.NewMicroTime(received)}
	if user != nil {
		ev.User = *user
	}
	for _, ip := range utilnet.SourceIPs(r) {
		ev.SourceIPs = append(ev.SourceIPs, ip.String())
	}
	if a.ResourceRequest {
		ev.ObjectRef = &audit.ObjectReference{Resource: a.Resource, Namespace: a.Namespace, Name: a.Name,
			Subresource: a.Subresource, APIGroup: a.APIGroup, APIVersion: a.APIVersion}
	}
	return audit.NewRecorder(cfg, s.cfg.AuditSink, ev), info
}

func userAgent(r *http.Request) string {
	ua := r.UserAgent()
	if len(ua) > maxUserAgentLength {
		ua = ua[:maxUserAgentLength] + "...TRUNCATED"
	}
	return ua
}

// longRunning is kube-apiserver's long-running check: watches, proxies,
// and the streaming pod subresources.
func longRunning(info requestInfo) bool {
	if !info.Resource {
		return false
	}
	switch info.Verb {
	case "watch", "proxy":
		return true
	}
	switch info.Subresource {
	case "attach", "exec", "proxy", "log", "portforward":
		return true
	}
	return false
}

func methodHasBody(m string) bool {
	switch m {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// auditJSON is a request or response body as JSON for the event: JSON
// as it is, YAML converted, protobuf decoded and encoded again (nil: not
// an object).
func (s *Server) auditJSON(contentType string, body []byte) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case protobufType:
		obj, gvk, err := s.proto.Decode(body, nil, nil)
		if err != nil {
			return nil
		}
		if gvk != nil {
			obj.GetObjectKind().SetGroupVersionKind(*gvk)
		}
		js, err := json.Marshal(obj)
		if err != nil {
			return nil
		}
		return js
	case "application/yaml", "application/apply-patch+yaml":
		js, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil
		}
		return js
	}
	if !json.Valid(body) {
		return nil
	}
	return body
}

// capturedBody keeps a copy of what the handler reads of the request
// body, up to limit.
type capturedBody struct {
	io.ReadCloser
	buf   bytes.Buffer
	limit int64
	over  bool
}

func (b *capturedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.over {
		if int64(b.buf.Len()+n) > b.limit {
			b.over = true
			b.buf = bytes.Buffer{}
		} else {
			b.buf.Write(p[:n])
		}
	}
	return n, err
}

// auditWriter follows the response for the event: its code, its body
// (up to limit), and for long-running requests the start of the
// response, which is the ResponseStarted stage.
type auditWriter struct {
	http.ResponseWriter
	rec     *audit.Recorder
	log     *slog.Logger
	long    bool
	limit   int
	buf     bytes.Buffer
	over    bool
	code    int
	started bool
}

func (a *auditWriter) setCode(code int) {
	if a.code == 0 {
		a.code = code
		a.rec.SetResponseCode(code)
	}
}

func (a *auditWriter) WriteHeader(code int) {
	a.setCode(code)
	a.ResponseWriter.WriteHeader(code)
}

func (a *auditWriter) Write(b []byte) (int, error) {
	a.setCode(http.StatusOK)
	if !a.over && a.limit > 0 {
		if a.buf.Len()+len(b) > a.limit {
			a.over, a.buf = true, bytes.Buffer{}
		} else {
			a.buf.Write(b)
		}
	}
	if a.long && !a.started && isJSON(a.Header().Get("Content-Type")) {
		// An error answering a watch is one Status, written at once:
		// ResponseStarted carries it, as upstream's does.
		a.rec.LogResponseObject(b, true)
	}
	a.start()
	return a.ResponseWriter.Write(b)
}

// Flush sends the headers (with a 200 unless another code was set), so
// a long-running response has started.
func (a *auditWriter) Flush() {
	a.setCode(http.StatusOK)
	a.start()
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection over (exec, attach, port-forward upgrades).
func (a *auditWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	a.setCode(http.StatusSwitchingProtocols)
	a.start()
	return http.NewResponseController(a.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection.
func (a *auditWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *auditWriter) start() {
	if a.long && !a.started {
		a.started = true
		a.process(audit.StageResponseStarted)
	}
}

func (a *auditWriter) process(stage audit.Stage) {
	switch err := a.rec.ProcessStage(stage); {
	case errors.Is(err, os.ErrClosed):
		// The server is stopping: watches ending after the log closed.
		a.log.Debug("audit: event after the log closed", "stage", stage)
	case err != nil:
		a.log.Error("audit: cannot write event", "stage", stage, "err", err)
	}
}

// finish writes ResponseComplete once the handler is done.
func (a *auditWriter) finish(s *Server) {
	switch {
	case a.code == 0:
		// Nothing was written: upstream's words for it.
		a.rec.SetResponseStatus(&metav1.Status{Code: http.StatusOK, Status: metav1.StatusSuccess, Message: "Connection closed early"})
	case !a.long && !a.over:
		a.rec.LogResponseObject(s.auditJSON(a.Header().Get("Content-Type"), a.buf.Bytes()), false)
	}
	a.start()
	a.process(audit.StageResponseComplete)
}

func isJSON(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
