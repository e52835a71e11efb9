package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"skiff/server/storage"
)

// watchOptions turns list options into where the watch starts.
func (s *Server) watchOptions(q *request, o listOptions) (storage.WatchOptions, error) {
	ctx := q.r.Context()
	wo := storage.WatchOptions{Predicate: o.pred, Bookmarks: o.bookmarks}
	rev, err := storage.ParseResourceVersion(o.rv)
	if err != nil {
		return wo, err
	}
	if o.initialEvents != nil && *o.initialEvents {
		// The streaming watch-list newer client-go uses instead of LIST.
		if !o.bookmarks {
			return wo, apierrors.NewBadRequest("sendInitialEvents requires allowWatchBookmarks=true")
		}
		if o.rv != "" && o.rvMatch != string(metav1.ResourceVersionMatchNotOlderThan) {
			return wo, apierrors.NewBadRequest("sendInitialEvents with a resourceVersion requires resourceVersionMatch=NotOlderThan")
		}
		wo.InitialEvents = true
		if o.rv == "" {
			return wo, s.st.Cache().WaitCurrent(ctx)
		}
		return wo, s.st.Cache().WaitFor(ctx, rev)
	}
	if o.rv == "" {
		// Start from a consistent current state, sent as ADDED events.
		return wo, s.st.Cache().WaitCurrent(ctx)
	}
	wo.Rev = rev
	return wo, nil
}

func (s *Server) watch(q *request) {
	o, err := s.parseListOptions(q)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	out, err := negotiate(q.r)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	wo, err := s.watchOptions(q, o)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	ctx := q.r.Context()
	w, err := s.st.Cache().Watch(ctx, q.res, wo)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	defer w.Stop()

	timeout := time.Duration(o.timeoutSeconds) * time.Second
	if timeout == 0 {
		// Spread reconnects as upstream does (30-60 min).
		timeout = 30*time.Minute + time.Duration(rand.Int64N(int64(30*time.Minute)))
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	flusher, _ := q.w.(http.Flusher)
	enc := &eventEncoder{s: s, q: q, table: out == outTable, partial: out == outPartialMetadata}
	_, canProto := q.res.New().(protoMarshaler)
	enc.proto = out == outProtobuf && canProto
	if enc.proto {
		q.w.Header().Set("Content-Type", protobufType+";stream=watch")
	} else {
		q.w.Header().Set("Content-Type", "application/json")
	}
	q.w.Header().Set("Cache-Control", "no-cache, private")
	q.w.WriteHeader(http.StatusOK)
	for _, ev := range w.Initial() {
		if !enc.write(ev) {
			return
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case ev, ok := <-w.Events():
			if !ok {
				return // cut off or cache restarted: the client resumes
			}
			if !enc.write(ev) {
				return
			}
			if flusher != nil && len(w.Events()) == 0 {
				flusher.Flush()
			}
		}
	}
}

// eventEncoder writes watch events as JSON lines, or as length-prefixed
// protobuf WatchEvents for clients that prefer protobuf (client-go's typed
// informers): decoding JSON is most of what a watching client spends.
type eventEncoder struct {
	s       *Server
	q       *request
	table   bool
	partial bool // metadata-only clients: PartialObjectMetadata objects
	proto   bool
	defined bool // column definitions already sent (Table watches)
	buf     bytes.Buffer
}

func (e *eventEncoder) write(ev storage.Event) bool {
	if e.proto {
		return e.writeProto(ev)
	}
	obj, ok := e.object(ev)
	if !ok {
		return true
	}
	e.buf.Reset()
	fmt.Fprintf(&e.buf, `{"type":%q,"object":`, ev.Type)
	e.buf.Write(obj)
	e.buf.WriteString("}\n")
	_, err := e.q.w.Write(e.buf.Bytes())
	return err == nil
}

// object is the encoded object of one event, in the watch's representation.
func (e *eventEncoder) object(ev storage.Event) ([]byte, bool) {
	if ev.Type == watch.Bookmark {
		if e.table {
			return nil, false
		}
		return e.bookmark(ev), true
	}
	if e.partial {
		b, err := json.Marshal(partial(ev.Entry.Obj))
		return b, err == nil
	}
	if !e.table {
		return ev.Entry.Raw, true
	}
	t, err := e.s.table(e.q, []*storage.Entry{ev.Entry}, 0, "", nil)
	if err != nil {
		return nil, false
	}
	if e.defined {
		t.ColumnDefinitions = nil
	}
	e.defined = true
	b, err := json.Marshal(t)
	return b, err == nil
}

func (e *eventEncoder) bookmark(ev storage.Event) []byte {
	obj := e.q.res.New()
	obj.GetObjectKind().SetGroupVersionKind(e.q.res.GVK())
	if e.partial {
		obj = &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}}
	}
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetResourceVersion(strconv.FormatInt(ev.Entry.Rev, 10))
		if ev.InitialEventsEnd {
			acc.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
	}
	b, _ := json.Marshal(obj)
	return b
}

// writeProto writes one event as upstream's protobuf watch stream frames
// it: a 4-byte big-endian length, then a metav1.WatchEvent whose object is
// the object's own protobuf wire format (magic, type envelope, message).
func (e *eventEncoder) writeProto(ev storage.Event) bool {
	var obj []byte
	var ok bool
	if ev.Type == watch.Bookmark {
		obj, ok = e.protoBookmark(ev)
	} else {
		obj, ok = protoObject(e.q.res, ev.Entry)
	}
	if !ok {
		return true
	}
	we := metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: obj}}
	b, err := we.Marshal()
	if err != nil {
		return true
	}
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(b)))
	e.buf.Reset()
	e.buf.Write(size[:])
	e.buf.Write(b)
	_, err = e.q.w.Write(e.buf.Bytes())
	return err == nil
}

func (e *eventEncoder) protoBookmark(ev storage.Event) ([]byte, bool) {
	obj := e.q.res.New()
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	acc.SetResourceVersion(strconv.FormatInt(ev.Entry.Rev, 10))
	if ev.InitialEventsEnd {
		acc.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	m, ok := obj.(protoMarshaler)
	if !ok {
		return nil, false
	}
	raw, err := m.Marshal()
	if err != nil {
		return nil, false
	}
	out, err := envelope(e.q.res.GroupVersion(), e.q.res.Kind, raw)
	return out, err == nil
}
