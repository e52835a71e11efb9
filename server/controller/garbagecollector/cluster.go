package garbagecollector

import (
	"context"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
)

// cluster is every API call the collector's decisions make. Objects are
// named by objectRef coordinates (apiVersion, kind, namespace, name); the
// UID in a ref is never sent as a selector, callers compare it themselves,
// because "same name, other UID" means the object they meant is gone.
// Errors are API errors (apierrors.IsNotFound, IsConflict work on them),
// or errUnknownKind when discovery does not serve the kind.
type cluster interface {
	// namespaced tells whether objects of this apiVersion and kind live in
	// namespaces; owner references need it to know where their owner is.
	namespaced(apiVersion, kind string) (bool, error)
	// get reads the object's current metadata from the API server, never
	// from a cache: the collector acts on nothing it has not confirmed.
	get(ctx context.Context, ref objectRef) (*metav1.PartialObjectMetadata, error)
	// delete deletes the object; opts carry the propagation policy and
	// UID/resourceVersion preconditions.
	delete(ctx context.Context, ref objectRef, opts metav1.DeleteOptions) error
	// patch applies a JSON merge patch to the object's metadata (owner
	// references or finalizers). Merge patches work on every resource,
	// custom ones included, unlike strategic merge patches.
	patch(ctx context.Context, ref objectRef, mergePatch []byte) error
}

// metadataCluster is the cluster over a metadata client, with kinds
// resolved through the latest discovery.
type metadataCluster struct {
	client  metadata.Interface
	mapping *atomic.Pointer[mapping]
}

func (c metadataCluster) namespaced(apiVersion, kind string) (bool, error) {
	r, err := c.mapping.Load().lookup(apiVersion, kind)
	return r.namespaced, err
}

func (c metadataCluster) resource(ref objectRef) (metadata.ResourceInterface, error) {
	r, err := c.mapping.Load().lookup(ref.APIVersion, ref.Kind)
	if err != nil {
		return nil, err
	}
	if !r.namespaced {
		return c.client.Resource(r.gvr), nil
	}
	return c.client.Resource(r.gvr).Namespace(ref.Namespace), nil
}

func (c metadataCluster) get(ctx context.Context, ref objectRef) (*metav1.PartialObjectMetadata, error) {
	ri, err := c.resource(ref)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, ref.Name, metav1.GetOptions{})
}

func (c metadataCluster) delete(ctx context.Context, ref objectRef, opts metav1.DeleteOptions) error {
	ri, err := c.resource(ref)
	if err != nil {
		return err
	}
	return ri.Delete(ctx, ref.Name, opts)
}

func (c metadataCluster) patch(ctx context.Context, ref objectRef, mergePatch []byte) error {
	ri, err := c.resource(ref)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, ref.Name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
	return err
}
