package openapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func get(h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

type handlerCase struct {
	name        string
	method      string
	target      string
	header      map[string]string
	wantCode    int
	wantType    string
	checkBody   func(t *testing.T, body []byte)
	wantHeaders map[string]string
}

func TestHandlerNegotiatesAndCaches(t *testing.T) {
	d := buildDocs(t)
	h := d.Handler()
	for _, tt := range handlerCases(d) {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			w := get(h, method, tt.target, tt.header)
			if w.Code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantCode, w.Body.String())
			}
			if tt.wantType != "" && w.Header().Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type %q, want %q", w.Header().Get("Content-Type"), tt.wantType)
			}
			for k, v := range tt.wantHeaders {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if tt.checkBody != nil {
				tt.checkBody(t, w.Body.Bytes())
			}
		})
	}
}

func handlerCases(d *Documents) []handlerCase {
	v2etag := strconv.Quote(d.v2.etag)
	return []handlerCase{
		{name: "v2 defaults to JSON", target: "/openapi/v2", wantCode: 200, wantType: mediaJSON,
			checkBody: func(t *testing.T, b []byte) {
				var sw spec.Swagger
				if err := json.Unmarshal(b, &sw); err != nil || sw.Swagger != "2.0" || len(sw.Definitions) == 0 {
					t.Fatalf("not a Swagger 2.0 document: %v", err)
				}
			}},
		{name: "v2 in protobuf for client-go's Accept header", target: "/openapi/v2",
			header: map[string]string{"Accept": mediaV2ProtoAt}, wantCode: 200, wantType: mediaV2Proto,
			checkBody: func(t *testing.T, b []byte) {
				var doc openapiv2.Document
				if err := proto.Unmarshal(b, &doc); err != nil || doc.GetSwagger() != "2.0" {
					t.Fatalf("not a gnostic v2 document: %v", err)
				}
			}},
		{name: "the preferred of several accepted types wins", target: "/openapi/v2",
			header:   map[string]string{"Accept": "application/json;q=0.5, " + mediaV2Proto},
			wantCode: 200, wantType: mediaV2Proto},
		{name: "a type we cannot produce is not acceptable", target: "/openapi/v2",
			header: map[string]string{"Accept": "application/xml"}, wantCode: http.StatusNotAcceptable},
		{name: "a matching If-None-Match is not modified", target: "/openapi/v2",
			header: map[string]string{"If-None-Match": v2etag}, wantCode: http.StatusNotModified,
			wantHeaders: map[string]string{"ETag": v2etag}},
		{name: "gzip is used when accepted", target: "/openapi/v2",
			header: map[string]string{"Accept-Encoding": "gzip"}, wantCode: 200, wantType: mediaJSON,
			wantHeaders: map[string]string{"Content-Encoding": "gzip"},
			checkBody: func(t *testing.T, b []byte) {
				zr, err := gzip.NewReader(bytes.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				plain, err := io.ReadAll(zr)
				if err != nil || !bytes.Equal(plain, bodyOf(t, d.v2)) {
					t.Fatalf("gzip body does not decode to the document: %v", err)
				}
			}},
		{name: "HEAD sends headers only", method: http.MethodHead, target: "/openapi/v2", wantCode: 200, wantType: mediaJSON,
			checkBody: func(t *testing.T, b []byte) {
				if len(b) != 0 {
					t.Fatalf("HEAD returned %d bytes", len(b))
				}
			}},
		{name: "writes are not allowed", method: http.MethodPost, target: "/openapi/v2", wantCode: http.StatusMethodNotAllowed},
		{name: "v3 index is JSON", target: "/openapi/v3", wantCode: 200, wantType: mediaJSON},
		{name: "v3 document without hash is served without caching headers", target: "/openapi/v3/apis/apps/v1",
			wantCode: 200, wantType: mediaJSON, wantHeaders: map[string]string{"Cache-Control": ""},
			checkBody: func(t *testing.T, b []byte) {
				var doc spec3.OpenAPI
				if err := json.Unmarshal(b, &doc); err != nil || doc.Version != "3.0.0" {
					t.Fatalf("not an OpenAPI 3.0 document: %v", err)
				}
			}},
		{name: "v3 document with a stale hash redirects to the current one", target: "/openapi/v3/apis/apps/v1?hash=OLD",
			wantCode:    http.StatusMovedPermanently,
			wantHeaders: map[string]string{"Location": "/openapi/v3/apis/apps/v1?hash=" + d.v3["apis/apps/v1"].etag}},
		{name: "v3 document in protobuf", target: "/openapi/v3/api/v1", header: map[string]string{"Accept": mediaV3ProtoAt},
			wantCode: 200, wantType: mediaV3Proto,
			checkBody: func(t *testing.T, b []byte) {
				var doc openapiv3.Document
				if err := proto.Unmarshal(b, &doc); err != nil || doc.GetOpenapi() != "3.0.0" {
					t.Fatalf("not a gnostic v3 document: %v", err)
				}
			}},
		{name: "unknown group-version is not found", target: "/openapi/v3/apis/nope/v1", wantCode: http.StatusNotFound},
		{name: "unknown path is not found", target: "/openapi/v4", wantCode: http.StatusNotFound},
	}
}

// TestV3IndexURLsResolveToImmutableDocuments checks every advertised URL.
func TestV3IndexURLsResolveToImmutableDocuments(t *testing.T) {
	d := buildDocs(t)
	h := d.Handler()
	var index v3Index
	if err := json.Unmarshal(get(h, http.MethodGet, "/openapi/v3", nil).Body.Bytes(), &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Paths) != 16 {
		t.Fatalf("index lists %d group-versions, want 16", len(index.Paths))
	}
	for gv, entry := range index.Paths {
		t.Run(gv, func(t *testing.T) {
			w := get(h, http.MethodGet, entry.ServerRelativeURL, map[string]string{"Accept": mediaJSON})
			msg := all(
				eq("status", w.Code, 200),
				eq("Cache-Control", w.Header().Get("Cache-Control"), "public, immutable"),
				eq("ETag", w.Header().Get("ETag"), strconv.Quote(d.v3[gv].etag)),
				eq("URL", entry.ServerRelativeURL, "/openapi/v3/"+gv+"?hash="+d.v3[gv].etag),
			)
			if msg != "" {
				t.Error(msg)
			}
		})
	}
}
