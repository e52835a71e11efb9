package audit

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sink takes the events of every stage of every audited request.
type Sink interface {
	// ProcessEvent records ev; it must not keep ev after returning.
	ProcessEvent(ev *Event) error
}

// Recorder collects the event of one audited request. Admission plugins
// reach it through the request's context (AddAnnotation); the API server
// fills in the rest and writes each stage. It is safe for concurrent use:
// validating webhooks annotate in parallel.
type Recorder struct {
	cfg  RequestConfig
	sink Sink
	mu   sync.Mutex
	ev   Event
}

// NewRecorder starts the event of a request audited as cfg says; ev
// carries what is known when the request arrives.
func NewRecorder(cfg RequestConfig, sink Sink, ev Event) *Recorder {
	ev.Kind, ev.APIVersion, ev.Level = "Event", GroupVersion, cfg.Level
	return &Recorder{cfg: cfg, sink: sink, ev: ev}
}

// Level is the request's audit level.
func (r *Recorder) Level() Level { return r.cfg.Level }

// OmitManagedFields reports whether logged bodies drop managedFields.
func (r *Recorder) OmitManagedFields() bool { return r.cfg.OmitManagedFields }

// Update changes the event under the recorder's lock.
func (r *Recorder) Update(f func(ev *Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.ev)
}

// Event is a copy of the event so far.
func (r *Recorder) Event() Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.ev
	ev.Annotations = maps.Clone(r.ev.Annotations)
	return ev
}

// AddAnnotation annotates the event. As upstream, a key keeps its first
// value: a second, different one is dropped.
func (r *Recorder) AddAnnotation(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ev.Annotations == nil {
		r.ev.Annotations = map[string]string{}
	}
	if _, ok := r.ev.Annotations[key]; ok {
		return
	}
	r.ev.Annotations[key] = value
}

// ProcessStage writes the event as of stage to the sink, unless the
// policy omits that stage.
func (r *Recorder) ProcessStage(stage Stage) error {
	if r.sink == nil || has(r.cfg.OmitStages, stage) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev.Stage = stage
	if stage == StageRequestReceived {
		r.ev.StageTimestamp = r.ev.RequestReceivedTimestamp
	} else {
		r.ev.StageTimestamp = metav1.NewMicroTime(time.Now())
	}
	// Under the lock, as upstream: a parallel annotation must not change
	// the event while the sink encodes it.
	return r.sink.ProcessEvent(&r.ev)
}

type recorderKey struct{}

type idKey struct{}

// WithRecorder returns a context carrying the request's recorder.
func WithRecorder(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// RecorderFrom returns the request's recorder, nil when the request is
// not audited.
func RecorderFrom(ctx context.Context) *Recorder {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// AddAnnotation annotates the audit event of the request in ctx (nothing
// when the request is not audited): what admission plugins record about
// their decision, such as a policy's validation failures.
func AddAnnotation(ctx context.Context, key, value string) {
	AddAnnotationWithLevel(ctx, key, value, LevelMetadata)
}

// AddAnnotationWithLevel annotates the event only when the request is
// audited at level or above (a webhook's patch is request content: it
// needs Request).
func AddAnnotationWithLevel(ctx context.Context, key, value string, level Level) {
	if r := RecorderFrom(ctx); r != nil && !r.Level().Less(level) {
		r.AddAnnotation(key, value)
	}
}

// LogImpersonatedUser records whom the request acts as.
func LogImpersonatedUser(ctx context.Context, u authenticationv1.UserInfo) {
	if r := RecorderFrom(ctx); r != nil {
		r.Update(func(ev *Event) { ev.ImpersonatedUser = &u })
	}
}

// WithID returns a context carrying the request's audit ID (every request
// has one, audited or not: it is echoed in the Audit-Id header).
func WithID(ctx context.Context, id types.UID) context.Context {
	return context.WithValue(ctx, idKey{}, id)
}

// IDFrom is the audit ID of the request in ctx ("" when none).
func IDFrom(ctx context.Context) types.UID {
	id, _ := ctx.Value(idKey{}).(types.UID)
	return id
}

// NewID makes an audit ID: a random (version 4) UUID, as upstream's.
func NewID() types.UID {
	var b [16]byte
	rand.Read(b[:]) // never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}
