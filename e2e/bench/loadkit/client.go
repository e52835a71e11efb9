// Package loadkit is what the API-server load clients under e2e/bench
// share: clients that each have their own connection and no client-side
// rate limit, a count of what went over the wire, timed concurrent
// operations with their latency statistics, problems printed as they
// happen, and the server's resident memory.
package loadkit

import (
	"errors"
	"fmt"
	"maps"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// ProtobufType is the Kubernetes protobuf media type.
const ProtobufType = "application/vnd.kubernetes.protobuf"

// Wire counts what went over the wire: the media types of request bodies
// and of responses, the response status codes by method and transport
// errors, so a run shows which encoding the server really used and every
// 5xx even when a phase prints only its first few errors.
type Wire struct {
	mu     sync.Mutex
	counts map[string]int64
}

// NewWire makes an empty count.
func NewWire() *Wire { return &Wire{counts: map[string]int64{}} }

func (w *Wire) add(keys ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		w.counts[k]++
	}
}

// Snapshot copies the counts.
func (w *Wire) Snapshot() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.counts)
}

// Line is the counts as one sorted "key=n  key=n" line.
func (w *Wire) Line() string {
	c := w.Snapshot()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, "  ")
}

type countingRT struct {
	rt http.RoundTripper
	w  *Wire
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	keys := []string{"accept " + r.Header.Get("Accept")}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		keys = append(keys, "sent "+shortType(ct))
	}
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		c.w.add(append(keys, "transport error")...)
		return resp, err
	}
	c.w.add(append(keys, fmt.Sprintf("%s->%d %s", r.Method, resp.StatusCode, shortType(resp.Header.Get("Content-Type"))))...)
	return resp, err
}

func shortType(ct string) string {
	mt, _, _ := mime.ParseMediaType(ct)
	switch mt {
	case ProtobufType:
		return "protobuf"
	case "application/json":
		return "json"
	case "":
		return "(none)"
	}
	return mt
}

// Clients makes client configurations from one kubeconfig's.
type Clients struct {
	Base *rest.Config
	// Protobuf sends and accepts protobuf instead of JSON.
	Protobuf bool
	// Wire, if set, counts every request of every client made.
	Wire *Wire
}

// Config is Base without client-side rate limits, in the chosen encoding,
// with a Dial of its own: client-go gives a config with a custom Dial its
// own transport, so every client made from one Config call has its own
// connection. timeout bounds each request (0: none, for watches).
func (c Clients) Config(timeout time.Duration) *rest.Config {
	cc := rest.CopyConfig(c.Base)
	cc.QPS = -1
	cc.Burst = 0
	cc.RateLimiter = nil
	cc.Timeout = timeout
	if c.Protobuf {
		cc.ContentType = ProtobufType
		cc.AcceptContentTypes = ProtobufType + ",application/json"
	} else {
		cc.ContentType = "application/json"
		cc.AcceptContentTypes = "application/json"
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cc.Dial = d.DialContext
	if c.Wire != nil {
		w := c.Wire
		cc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, w} }
	}
	return cc
}

// Describe is err with the server's status code, reason and details when
// it sent a Status.
func Describe(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		return fmt.Sprintf("%v [code=%d reason=%s details=%+v]", err, st.Code, st.Reason, st.Details)
	}
	return err.Error()
}
