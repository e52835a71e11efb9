package main

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// wire counts response status codes by method and media type, so a run
// shows every 5xx and transport error even when the phases only print
// their first few errors.
type wire struct {
	mu     sync.Mutex
	counts map[string]int64
}

func (w *wire) add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[key]++
}

func (w *wire) snapshot() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int64, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

type countingRT struct {
	rt http.RoundTripper
	w  *wire
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		c.w.add("transport error")
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	c.w.add(fmt.Sprintf("%s->%d %s", r.Method, resp.StatusCode, mt))
	return resp, err
}

// clientConfig is cfg without client-side rate limits, speaking JSON,
// with a Dial of its own: client-go gives a config with a custom Dial its
// own transport, so every client made from it has its own connection.
func clientConfig(cfg *rest.Config, timeout time.Duration, w *wire) *rest.Config {
	cc := rest.CopyConfig(cfg)
	cc.QPS = -1
	cc.Burst = 0
	cc.RateLimiter = nil
	cc.Timeout = timeout
	cc.ContentType = "application/json"
	cc.AcceptContentTypes = "application/json"
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cc.Dial = d.DialContext
	cc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, w} }
	return cc
}

func newDynamic(cfg *rest.Config, timeout time.Duration, w *wire) (*dynamic.DynamicClient, error) {
	return dynamic.NewForConfig(clientConfig(cfg, timeout, w))
}

// newHTTP is a plain HTTP client with the kubeconfig's credentials, for
// requests whose raw bytes and timing matter (LIST, readiness polls).
func newHTTP(cfg *rest.Config, timeout time.Duration, w *wire) (*http.Client, error) {
	return rest.HTTPClientFor(clientConfig(cfg, timeout, w))
}

func describe(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		return fmt.Sprintf("%v [code=%d reason=%s details=%+v]", err, st.Code, st.Reason, st.Details)
	}
	return err.Error()
}

// ---- statistics

type latStats struct {
	Count  int     `json:"count"`
	Errors int64   `json:"errors"`
	WallS  float64 `json:"wall_s"`
	PerSec float64 `json:"per_s"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the nearest-rank percentile of sorted durations.
func pct(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// summarize gives successful operations per second of wall time and the
// latency percentiles of every attempt.
func summarize(lat []time.Duration, errs int64, wall time.Duration) latStats {
	s := slices.Clone(lat)
	slices.Sort(s)
	st := latStats{Count: len(s), Errors: errs, WallS: wall.Seconds(), P50ms: ms(pct(s, 0.5)), P99ms: ms(pct(s, 0.99))}
	if len(s) > 0 {
		st.MaxMs = ms(s[len(s)-1])
	}
	if wall > 0 {
		st.PerSec = float64(int64(len(s))-errs) / wall.Seconds()
	}
	return st
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// ---- memory

type rssSample struct {
	Label  string  `json:"label"`
	RSSMiB float64 `json:"rss_mib"`
	HWMMiB float64 `json:"peak_rss_mib"`
	CPU    string  `json:"cpu_time"`
}

// sampleRSS reads the server's resident set with ps, as e2e/bench/run.sh
// does, and its peak (VmHWM) from /proc. pid 0 means not measured.
func sampleRSS(pid int, label string) (rssSample, error) {
	s := rssSample{Label: label}
	if pid == 0 {
		return s, errors.New("no -pid given")
	}
	out, err := exec.Command("ps", "-o", "rss=,cputime=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return s, fmt.Errorf("ps -p %d: %w", pid, err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return s, fmt.Errorf("ps -p %d: unexpected output %q", pid, out)
	}
	kb, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("ps -p %d: rss %q: %w", pid, f[0], err)
	}
	s.RSSMiB, s.CPU = kb/1024, f[1]
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64); err == nil {
					s.HWMMiB = kb / 1024
				}
			}
		}
	}
	return s, nil
}
