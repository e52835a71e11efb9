package server

import (
	"context"
	"log/slog"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/dynamic"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/crd"
	"skiff/server/defaults"
	"skiff/server/openapi"
	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/server/validation"
	"skiff/server/webhook"
)

// extensionRows are the rows of the extension API kinds: the
// CustomResourceDefinition row deletes a CRD's objects before the CRD, and
// a CRD may not take a built-in resource or kind (reg is the registry the
// rows join, read when a CRD is validated).
func extensionRows(reg func() *registry.Registry) []*registry.Resource {
	builtin := func(match func(r *registry.Resource) bool) bool {
		for _, r := range reg().All() {
			if !r.Custom && match(r) {
				return true
			}
		}
		return false
	}
	cv := validation.CRDValidator{
		Builtin: func(gr schema.GroupResource) bool {
			return builtin(func(r *registry.Resource) bool { return r.Group == gr.Group && r.Name == gr.Resource })
		},
		BuiltinKind: func(gk schema.GroupKind) bool {
			return builtin(func(r *registry.Resource) bool { return r.Group == gk.Group && r.Kind == gk.Kind })
		},
	}
	rows := registry.APIExtensions(registry.Hooks{Default: defaults.Apply, Validate: cv.Validate, ValidateUpdate: cv.ValidateUpdate, ValidateSubresource: cv.ValidateSubresource})
	for _, r := range rows {
		if r.Name == "customresourcedefinitions" {
			r.BeforeDelete = crd.PrepareDelete
		}
	}
	return rows
}

// crdConfig is what startCRDs needs from the server.
type crdConfig struct {
	reg      *registry.Registry
	objects  *storage.Storage
	api      *apiserver.Server
	system   *auth.User
	webhooks *webhook.Client
	changed  []func([]*apiextensionsv1.CustomResourceDefinition)
	// openapi publishes the CRDs' schemas and gives their server-side
	// apply types.
	openapi *openapi.Published
	log     *slog.Logger
}

// startCRDs serves CustomResourceDefinitions until ctx ends; the returned
// function waits for the manager to stop.
func startCRDs(ctx context.Context, c crdConfig) (wait func(), err error) {
	dyn, err := dynamic.NewForConfig(inProcessConfig(c.api.Transport(c.system)))
	if err != nil {
		return nil, err
	}
	changed := c.changed
	var applyTypes func(*apiextensionsv1.CustomResourceDefinition, string) (managedfields.TypeConverter, error)
	if pub := c.openapi; pub != nil {
		changed = append(changed, func(crds []*apiextensionsv1.CustomResourceDefinition) {
			if err := pub.SetCustomResources(crds); err != nil {
				c.log.Warn("publishing CRD schemas", "err", err)
			}
		})
		applyTypes = func(def *apiextensionsv1.CustomResourceDefinition, _ string) (managedfields.TypeConverter, error) {
			return pub.TypeConverter(def)
		}
	}
	m, err := crd.New(crd.Config{Registry: c.reg, Cache: c.objects.Cache(), Client: dyn, Webhooks: c.webhooks,
		ApplyTypes: applyTypes, Changed: changed, Logger: c.log})
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.Run(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("CRD manager stopped", "err", err)
		}
	})
	return wg.Wait, nil
}
