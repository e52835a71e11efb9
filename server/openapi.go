package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/apiserver"
	"skiff/server/openapi"
	"skiff/server/registry"
)

// lazyOpenAPI builds the OpenAPI documents in the background, so that they
// do not delay start-up (they take a few hundred milliseconds), and serves
// them once built.
type lazyOpenAPI struct {
	once  sync.Once
	ready chan struct{}
	h     http.Handler
	err   error
}

func newLazyOpenAPI(reg *registry.Registry, version string) *lazyOpenAPI {
	l := &lazyOpenAPI{ready: make(chan struct{})}
	go func() {
		defer close(l.ready)
		docs, err := openapi.Build(openAPIResources(reg), "Kubernetes", version)
		if err != nil {
			l.err = err
			return
		}
		l.h = docs.Handler()
	}()
	return l
}

func (l *lazyOpenAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-l.ready:
	case <-ctx.Done():
		http.Error(w, "OpenAPI documents are not ready", http.StatusServiceUnavailable)
		return
	}
	if l.err != nil {
		apiErr := apierrors.NewInternalError(l.err)
		http.Error(w, apiErr.Error(), http.StatusInternalServerError)
		return
	}
	l.h.ServeHTTP(w, r)
}

func openAPIResources(reg *registry.Registry) []openapi.Resource {
	var out []openapi.Resource
	for _, res := range reg.All() {
		out = append(out, openapi.Resource{
			GVK: res.GVK(), ListKind: res.ListKind, Plural: res.Name, Namespaced: res.Namespaced,
			Object: res.New(), List: res.NewList(), Subresources: apiserver.SubresourceNames(res), Verbs: res.Verbs,
		})
	}
	return out
}
