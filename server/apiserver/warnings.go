package apiserver

import (
	"context"
	"net/http"
	"sync"
)

// Warner takes the warnings admission sends back to the client (Warning
// headers, which kubectl prints), as upstream's warning recorder does.
type Warner interface {
	AddWarning(msg string)
}

type warnerKey struct{}

// WarnerFrom is the request's Warner (nil outside a request).
func WarnerFrom(ctx context.Context) Warner {
	w, _ := ctx.Value(warnerKey{}).(Warner)
	return w
}

// headerWarner writes each distinct warning once as a Warning header.
type headerWarner struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	seen map[string]bool
}

func (h *headerWarner) AddWarning(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if msg == "" || h.seen[msg] {
		return
	}
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	h.seen[msg] = true
	addWarning(h.w, msg)
}

// withWarner gives admission a way to warn the client of this request.
func withWarner(ctx context.Context, w http.ResponseWriter) context.Context {
	if WarnerFrom(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, warnerKey{}, Warner(&headerWarner{w: w}))
}
