package stream

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"skiff/runtime/crilog"
)

// parseLogQuery reads the kubelet's containerLogs query parameters.
func parseLogQuery(q url.Values, now time.Time) (previous bool, o crilog.ReadOptions, err error) {
	o.Follow = boolParam(q, "follow")
	o.Timestamps = boolParam(q, "timestamps")
	previous = boolParam(q, "previous")
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return false, o, fmt.Errorf("sinceSeconds: must be a positive integer, got %q", v)
		}
		t := now.Add(-time.Duration(n) * time.Second)
		o.SinceTime = &t
	}
	if v := q.Get("sinceTime"); v != "" {
		if o.SinceTime != nil {
			return false, o, fmt.Errorf("at most one of sinceTime or sinceSeconds may be specified")
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return false, o, fmt.Errorf("sinceTime: %w", err)
		}
		o.SinceTime = &t
	}
	if o.TailLines, err = int64Param(q, "tailLines", 0); err != nil {
		return false, o, err
	}
	if o.LimitBytes, err = int64Param(q, "limitBytes", 1); err != nil {
		return false, o, err
	}
	switch strings.ToLower(q.Get("stream")) {
	case "", "all":
	case "stdout":
		o.Stream = "stdout"
	case "stderr":
		o.Stream = "stderr"
	default:
		return false, o, fmt.Errorf("stream: want Stdout, Stderr or All, got %q", q.Get("stream"))
	}
	return previous, o, nil
}

func boolParam(q url.Values, name string) bool {
	v := strings.ToLower(q.Get(name))
	return v == "1" || v == "true"
}

func int64Param(q url.Values, name string, min int64) (*int64, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min {
		return nil, fmt.Errorf("%s: must be an integer ≥ %d, got %q", name, min, v)
	}
	return &n, nil
}

// serveLogs streams a container's log as `kubectl logs` shows it.
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, name := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	previous, opts, err := parseLogQuery(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ref, err := s.cfg.Pods.Container(ns, pod, name, previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if ref.LogPath == "" {
		http.Error(w, fmt.Sprintf("container %q in pod %q has no log", name, pod), http.StatusNotFound)
		return
	}
	opts.Done = func() bool {
		cur, err := s.cfg.Pods.Container(ns, pod, name, previous)
		return previous || err != nil || !cur.Running || cur.ID != ref.ID
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	cw := &countingWriter{w: w}
	out := io.Writer(cw)
	if opts.Follow {
		// Headers go out now: the client learns the log exists before the
		// first line, which may be a long time coming.
		w.WriteHeader(http.StatusOK)
		out = &flushWriter{w: cw, rc: http.NewResponseController(w)}
		out.Write(nil)
	}
	err = crilog.Read(r.Context(), ref.LogPath, opts, out)
	switch {
	case err == nil || r.Context().Err() != nil:
	case errors.Is(err, fs.ErrNotExist) && cw.n == 0 && !opts.Follow:
		w.Header().Del("X-Content-Type-Options")
		http.Error(w, fmt.Sprintf("log of container %q in pod %s/%s not found", name, ns, pod), http.StatusNotFound)
	default:
		s.log.Debug("log stream ended", "pod", ns+"/"+pod, "container", name, "err", err)
	}
}

// countingWriter counts what reached the client.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// flushWriter sends every write to the client at once (followed logs).
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
