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

// lazyOpenAPI builds the built-in OpenAPI documents when they are first
// asked for: they take a few hundred milliseconds and about 25 MB, which a
// server that only runs workloads never needs to spend. The CRD engine
// publishes its CRDs through Published at any time, before or after.
type lazyOpenAPI struct {
	once    sync.Once
	ready   chan struct{}
	reg     *registry.Registry
	version string
	pub     *openapi.Published
	err     error
}

func newLazyOpenAPI(reg *registry.Registry, version string) *lazyOpenAPI {
	return &lazyOpenAPI{ready: make(chan struct{}), reg: reg, version: version, pub: openapi.NewPublished(nil)}
}

// Published is where the CRD engine sets the current CRDs
// (SetCustomResources) and takes their server-side apply type converters.
func (l *lazyOpenAPI) Published() *openapi.Published { return l.pub }

func (l *lazyOpenAPI) build() {
	defer close(l.ready)
	docs, err := openapi.Build(openAPIResources(l.reg), "Kubernetes", l.version)
	if err != nil {
		l.err = err
		return
	}
	l.err = l.pub.SetBuiltins(docs)
}

func (l *lazyOpenAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.once.Do(func() { go l.build() })
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
	l.pub.Handler().ServeHTTP(w, r)
}

// openAPIResources are the built-in rows; custom resources (CRD rows) are
// described from their CRDs by Published.SetCustomResources.
func openAPIResources(reg *registry.Registry) []openapi.Resource {
	var out []openapi.Resource
	for _, res := range reg.All() {
		if res.Custom {
			continue
		}
		out = append(out, openapi.Resource{
			GVK: res.GVK(), ListKind: res.ListKind, Plural: res.Name, Namespaced: res.Namespaced,
			Object: res.New(), List: res.NewList(), Subresources: apiserver.SubresourceNames(res), Verbs: res.Verbs,
		})
	}
	return out
}
