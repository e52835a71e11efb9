package probe

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Kind says which of a container's probes a worker runs.
type Kind string

const (
	Liveness  Kind = "Liveness"
	Readiness Kind = "Readiness"
	Startup   Kind = "Startup"
)

// WorkerConfig is one probe of one container.
type WorkerConfig struct {
	Kind   Kind
	Probe  *corev1.Probe
	Target Target
	Exec   Execer
	// Clock paces the worker (the real clock when nil).
	Clock clock.WithTicker
	// StartedAt is when the container started; initialDelaySeconds counts
	// from it.
	StartedAt time.Time
	// Gate, when set, holds probing back while it returns false (liveness
	// and readiness wait for the startup probe).
	Gate func() bool
	// OnResult is called when the worker's verdict changes, once the
	// success or failure threshold is reached.
	OnResult func(r Result, msg string)
	// OnFailedAttempt is called for every failed attempt (the Unhealthy
	// event); may be nil.
	OnFailedAttempt func(msg string)
}

// Worker probes one container periodically until its context ends.
type Worker struct {
	cfg       WorkerConfig
	result    Result
	successes int32
	failures  int32
}

// NewWorker makes a worker; Run starts it.
func NewWorker(cfg WorkerConfig) *Worker {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Worker{cfg: cfg}
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

// Run probes until ctx ends. A startup worker stops after its first
// success; liveness and startup workers stop after reporting a failure (the container
// is about to be killed and a new worker will watch its successor).
func (w *Worker) Run(ctx context.Context) {
	p := w.cfg.Probe
	period := time.Duration(orDefault(p.PeriodSeconds, 10)) * time.Second
	if delay := time.Duration(p.InitialDelaySeconds)*time.Second - w.cfg.Clock.Since(w.cfg.StartedAt); delay > 0 {
		select {
		case <-ctx.Done():
			return
		case <-w.cfg.Clock.After(delay):
		}
	}
	ticker := w.cfg.Clock.NewTicker(period)
	defer ticker.Stop()
	for {
		if w.cfg.Gate == nil || w.cfg.Gate() {
			if !w.probeOnce(ctx) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// probeOnce runs one attempt and reports whether the worker goes on.
func (w *Worker) probeOnce(ctx context.Context) bool {
	p := w.cfg.Probe
	timeout := time.Duration(orDefault(p.TimeoutSeconds, 1)) * time.Second
	res, msg := Do(ctx, FromProbe(p), w.cfg.Target, w.cfg.Exec, timeout)
	if ctx.Err() != nil {
		return false
	}
	if res == Success {
		w.failures = 0
		w.successes++
		need := orDefault(p.SuccessThreshold, 1)
		if w.cfg.Kind != Readiness {
			need = 1
		}
		if w.successes >= need && w.result != Success {
			w.result = Success
			w.report(Success, "")
		}
		return !(w.cfg.Kind == Startup && w.result == Success)
	}
	w.successes = 0
	w.failures++
	if w.cfg.OnFailedAttempt != nil {
		w.cfg.OnFailedAttempt(msg)
	}
	if w.failures >= orDefault(p.FailureThreshold, 3) && w.result != Failure {
		w.result = Failure
		w.report(Failure, msg)
		if w.cfg.Kind != Readiness {
			return false
		}
	}
	return true
}

func (w *Worker) report(r Result, msg string) {
	if w.cfg.OnResult != nil {
		w.cfg.OnResult(r, msg)
	}
}
