package policy

import (
	"context"
	"log/slog"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
)

// StatusConfig configures the status controller.
type StatusConfig struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// Kinds resolves the types expressions are checked against (nil:
	// from the client's discovery and client-go's scheme).
	Kinds  Kinds
	Logger *slog.Logger
}

// RunStatus is upstream's validatingadmissionpolicy-status controller:
// each new generation of a policy gets status.observedGeneration and
// status.typeChecking, which clients wait for to know the policy was
// checked, with the expressions type-checked against the matched
// built-in kinds' types (typecheck.go); custom resources are not checked.
func RunStatus(ctx context.Context, cfg StatusConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	inf := cfg.Informers.Admissionregistration().V1().ValidatingAdmissionPolicies()
	q := worker.New(worker.Config{Name: "validatingadmissionpolicy-status", Log: log,
		Message: "updating the status of a ValidatingAdmissionPolicy failed", Noun: "policy",
		Quiet: apierrors.IsConflict, QuietMessage: "policy changed while its status was written"})
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: q.Enqueue, UpdateFunc: q.EnqueueUpdate}); err != nil {
		return err
	}
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	kinds := cfg.Kinds
	if kinds == nil {
		kinds = discoveryKinds{cfg.Client}
	}
	lister := inf.Lister()
	q.Run(ctx, 1, func(ctx context.Context, key string) error {
		pol, err := lister.Get(key)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return syncStatus(ctx, cfg.Client, kinds, pol)
	})
	return nil
}

func syncStatus(ctx context.Context, c kubernetes.Interface, kinds Kinds, pol *admissionregistrationv1.ValidatingAdmissionPolicy) error {
	if pol.Generation <= pol.Status.ObservedGeneration {
		return nil
	}
	next := pol.DeepCopy()
	next.Status.ObservedGeneration = pol.Generation
	next.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: typeCheck(ctx, pol, kinds)}
	_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: "validatingadmissionpolicy-status"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// discoveryKinds finds a resource's kind through discovery, a built-in
// kind's schema from its Go type in client-go's scheme and a custom
// resource's from its CustomResourceDefinition.
type discoveryKinds struct{ c kubernetes.Interface }

func (k discoveryKinds) resources(gv schema.GroupVersion) []metav1.APIResource {
	list, err := k.c.Discovery().ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return nil
	}
	return list.APIResources
}

func (k discoveryKinds) KindFor(_ context.Context, gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool) {
	for _, r := range k.resources(gvr.GroupVersion()) {
		if r.Name == gvr.Resource {
			return gvr.GroupVersion().WithKind(r.Kind), true
		}
	}
	return schema.GroupVersionKind{}, false
}

func (k discoveryKinds) Schema(ctx context.Context, gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, bool) {
	if obj, err := scheme.Scheme.New(gvk); err == nil {
		return GoTypeSchema(obj), true
	}
	for _, r := range k.resources(gvk.GroupVersion()) {
		if r.Kind != gvk.Kind || strings.Contains(r.Name, "/") {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		err := k.c.Discovery().RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", r.Name+"."+gvk.Group).
			Do(ctx).Into(&crd)
		if err != nil {
			return nil, false
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == gvk.Version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				return v.Schema.OpenAPIV3Schema, true
			}
		}
	}
	return nil, false
}
