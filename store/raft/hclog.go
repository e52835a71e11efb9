package raft

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter hands hashicorp/raft's logs to slog. Raft is chatty at info
// (every election, every snapshot, every connection), so only warnings and
// errors pass: those are what an operator acts on.
type hclogAdapter struct {
	log  *slog.Logger
	name string
	args []interface{}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{log: l, name: name}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...interface{}) {
	var sl slog.Level
	switch level {
	case hclog.Warn:
		sl = slog.LevelWarn
	case hclog.Error:
		sl = slog.LevelError
	default:
		return
	}
	if !h.log.Enabled(context.Background(), sl) {
		return
	}
	all := make([]interface{}, 0, len(h.args)+len(args)+2)
	all = append(all, "component", h.name)
	all = append(all, h.args...)
	all = append(all, args...)
	h.log.Log(context.Background(), sl, msg, all...)
}

func (h *hclogAdapter) Trace(msg string, args ...interface{}) {}
func (h *hclogAdapter) Debug(msg string, args ...interface{}) {}
func (h *hclogAdapter) Info(msg string, args ...interface{})  {}
func (h *hclogAdapter) Warn(msg string, args ...interface{}) {
	h.Log(hclog.Warn, msg, args...)
}
func (h *hclogAdapter) Error(msg string, args ...interface{}) {
	h.Log(hclog.Error, msg, args...)
}
func (h *hclogAdapter) IsTrace() bool { return false }
func (h *hclogAdapter) IsDebug() bool { return false }
func (h *hclogAdapter) IsInfo() bool  { return false }
func (h *hclogAdapter) IsWarn() bool  { return true }
func (h *hclogAdapter) IsError() bool { return true }

func (h *hclogAdapter) ImpliedArgs() []interface{} { return h.args }

func (h *hclogAdapter) With(args ...interface{}) hclog.Logger {
	c := *h
	c.args = append(append([]interface{}(nil), h.args...), args...)
	return &c
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

// The level is fixed at warn; raft never changes it.
func (h *hclogAdapter) SetLevel(hclog.Level)  {}
func (h *hclogAdapter) GetLevel() hclog.Level { return hclog.Warn }

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Warn(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
