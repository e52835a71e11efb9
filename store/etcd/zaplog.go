package etcd

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger makes the etcd client (which logs with zap) log its
// warnings and errors to l. Its info and debug lines (balancer and
// connection chatter) are dropped.
func newZapLogger(l *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: l.With("component", "etcd-client")})
}

// retryWarning is the client's message for a failed request attempt.
const retryWarning = "retrying of unary invoker failed"

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	level := slog.LevelWarn
	switch {
	case e.Level >= zapcore.ErrorLevel:
		level = slog.LevelError
	case e.Message == retryWarning:
		// Logged for every failed request, including the refusals this
		// package expects (a compacted or future revision) and each
		// attempt during an outage, which the caller gets as an error.
		level = slog.LevelDebug
	}
	c.log.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
