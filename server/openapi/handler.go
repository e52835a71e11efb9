package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"
)

// Media types of the documents. client-go asks for the v2 document only in
// protobuf (the "@" spelling), so it must be offered, not just JSON.
const (
	mediaJSON      = "application/json"
	mediaV2Proto   = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaV2ProtoAt = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mediaV3Proto   = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	mediaV3ProtoAt = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

func v2ProtoTypes() []string { return []string{mediaV2Proto, mediaV2ProtoAt} }
func v3ProtoTypes() []string { return []string{mediaV3Proto, mediaV3ProtoAt} }

// v2Proto converts a Swagger 2.0 JSON document to gnostic's protobuf form.
func v2Proto(raw []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("parse v2 document: %w", err)
	}
	return proto.Marshal(doc)
}

// v3Proto converts an OpenAPI 3.0 JSON document to gnostic's protobuf form.
func v3Proto(raw []byte) ([]byte, error) {
	doc, err := openapiv3.ParseDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("parse v3 document: %w", err)
	}
	return proto.Marshal(doc)
}

// lazy computes bytes once, on first use: the protobuf and gzip forms cost
// more to make than most clients will ever ask for.
type lazy struct {
	once sync.Once
	make func() ([]byte, error)
	data []byte
	err  error
}

func (l *lazy) get() ([]byte, error) {
	l.once.Do(func() { l.data, l.err = l.make() })
	return l.data, l.err
}

func gzipped(src *lazy) *lazy {
	return &lazy{make: func() ([]byte, error) {
		raw, err := src.get()
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(raw); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return buf.Bytes(), nil
	}}
}

// variant is one encoding of a document.
type variant struct {
	contentType string
	body, gz    *lazy
}

// document is a served document: its JSON, other encodings and its ETag.
// The ETag is also the hash in v3 URLs, so it identifies the content.
type document struct {
	etag     string
	variants map[string]*variant // by the media types a client may ask for
	offered  []string            // those media types, JSON first
}

func newDocument(raw []byte, protoTypes []string, toProto func([]byte) ([]byte, error)) *document {
	d := &document{etag: fmt.Sprintf("%X", sha512.Sum512(raw)), variants: map[string]*variant{}}
	js := &lazy{make: func() ([]byte, error) { return raw, nil }}
	d.add([]string{mediaJSON}, &variant{contentType: mediaJSON, body: js, gz: gzipped(js)})
	if toProto != nil {
		pb := &lazy{make: func() ([]byte, error) { return toProto(raw) }}
		d.add(protoTypes, &variant{contentType: protoTypes[0], body: pb, gz: gzipped(pb)})
	}
	return d
}

func (d *document) add(types []string, v *variant) {
	for _, t := range types {
		d.variants[t] = v
		d.offered = append(d.offered, t)
	}
}

// snapshot is one consistent set of served documents. It is never changed:
// a new set of CRDs makes a new snapshot.
type snapshot struct {
	v2    *lazyDocument
	v3    map[string]*document // by group-version path
	index *document
}

// lazyDocument is a document made on first use: the v2 document with the
// CRDs spliced in is megabytes that a CRD change need not copy and hash
// until someone asks.
type lazyDocument struct {
	once sync.Once
	make func() *document
	doc  *document
}

func readyV2(d *document) *lazyDocument {
	l := &lazyDocument{doc: d}
	l.once.Do(func() {})
	return l
}

func (l *lazyDocument) get() *document {
	l.once.Do(func() { l.doc = l.make() })
	return l.doc
}

// Handler serves GET /openapi/v2, /openapi/v3 and /openapi/v3/<group-version>
// on their full paths; mount it under "/openapi/". Documents are JSON unless
// the client asks for gnostic protobuf; a client accepting neither gets 406.
func (d *Documents) Handler() http.Handler {
	return snapshotHandler(func() *snapshot { return d.snap })
}

// snapshotHandler serves the snapshot current returns at each request; nil
// means the documents are not built yet.
func snapshotHandler(current func() *snapshot) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		s := current()
		if s == nil {
			http.Error(w, "OpenAPI documents are not ready", http.StatusServiceUnavailable)
			return
		}
		path := strings.TrimSuffix(r.URL.Path, "/")
		switch {
		case path == "/openapi/v2":
			serve(w, r, s.v2.get(), false)
		case path == "/openapi/v3":
			serve(w, r, s.index, false)
		case strings.HasPrefix(path, "/openapi/v3/"):
			s.serveGroupVersion(w, r, strings.TrimPrefix(path, "/openapi/v3/"))
		default:
			http.NotFound(w, r)
		}
	})
}

// serveGroupVersion serves one v3 document. A request carrying the current
// hash may be cached forever; an outdated hash is redirected to the current
// one, as upstream does.
func (s *snapshot) serveGroupVersion(w http.ResponseWriter, r *http.Request, gv string) {
	doc, ok := s.v3[gv]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hash := r.URL.Query().Get("hash")
	if hash != "" && hash != doc.etag {
		u := url.URL{Path: "/openapi/v3/" + gv, RawQuery: url.Values{"hash": {doc.etag}}.Encode()}
		http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
		return
	}
	serve(w, r, doc, hash != "")
}

func serve(w http.ResponseWriter, r *http.Request, doc *document, immutable bool) {
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	v := doc.variants[goautoneg.Negotiate(accept, doc.offered)]
	if v == nil {
		http.Error(w, "the OpenAPI document is available as "+strings.Join(doc.offered, ", "), http.StatusNotAcceptable)
		return
	}
	h.Set("ETag", strconv.Quote(doc.etag))
	if immutable {
		h.Set("Cache-Control", "public, immutable")
		h.Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	if etagMatches(r.Header.Get("If-None-Match"), doc.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	src := v.body
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		src = v.gz
		h.Set("Content-Encoding", "gzip")
	}
	body, err := src.get()
	if err != nil {
		h.Del("Content-Encoding")
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", v.contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

// etagMatches implements If-None-Match with weak comparison.
func etagMatches(header, etag string) bool {
	for _, candidate := range strings.Split(header, ",") {
		candidate = strings.TrimPrefix(strings.TrimSpace(candidate), "W/")
		if candidate == "*" || strings.Trim(candidate, `"`) == etag {
			return true
		}
	}
	return false
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, found := strings.CutPrefix(strings.TrimSpace(params), "q=")
		if !found {
			return true
		}
		f, err := strconv.ParseFloat(q, 64)
		return err == nil && f > 0
	}
	return false
}
