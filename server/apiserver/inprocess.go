package apiserver

import (
	"io"
	"net/http"
	"sync"

	"skiff/server/auth"
)

// Transport is an http.RoundTripper that serves requests inside this
// process as user: the control loops talk to the API server with client-go
// without TLS or a socket, and their requests still go through
// authorization, admission and validation like any other.
func (s *Server) Transport(user *auth.User) http.RoundTripper {
	return &inProcess{h: s.Handler(), user: user}
}

type inProcess struct {
	h    http.Handler
	user *auth.User
}

func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(auth.WithInProcessUser(req.Context(), t.user))
	if req.Body == nil {
		req.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	rw := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			rw.writeHeader(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(rw, req)
	}()
	select {
	case <-rw.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: http.StatusText(rw.code), StatusCode: rw.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rw.header, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter streams a handler's response into a pipe: headers are handed
// over at the first write, so watches stream.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	code   int
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) { w.writeHeader(code) }

func (w *pipeWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.header = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush is a no-op: every Write already reaches the reader.
func (w *pipeWriter) Flush() {}
