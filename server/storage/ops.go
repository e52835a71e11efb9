package storage

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/registry"
	"skiff/store"
)

// Get reads one object from the store (a consistent read).
func (s *Storage) Get(ctx context.Context, res *registry.Resource, namespace, name string) (*Entry, error) {
	kv, err := s.st.Get(ctx, res.Key(namespace, name))
	if err != nil {
		return nil, APIError(err, res, name)
	}
	e, err := Decode(res, kv)
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		return nil, status.(error) // a conversion webhook's error says it all
	case err != nil:
		return nil, apierrors.NewInternalError(err)
	}
	return e, nil
}

// Create stores a new object and returns it as stored.
func (s *Storage) Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (*Entry, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if acc.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	val, err := encode(res, obj)
	if err != nil {
		return nil, err
	}
	kv, err := s.st.Create(ctx, res.Key(acc.GetNamespace(), acc.GetName()), val)
	if err != nil {
		return nil, APIError(err, res, acc.GetName())
	}
	return written(obj, acc, servedEncoding(res, val), kv.ModRevision)
}

// written is the entry of an object just stored at rev: the object and its
// encoding are already in hand, so both are stamped with the revision
// rather than decoded from the store.
func written(obj runtime.Object, acc metav1.Object, stored []byte, rev int64) (*Entry, error) {
	acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	raw, ok := stampResourceVersion(stored, rev)
	if !ok {
		var err error
		if raw, err = json.Marshal(obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	return &Entry{Obj: obj, Raw: raw, Rev: rev}, nil
}

// Update replaces an object if its stored revision is expectedRev (0: any).
func (s *Storage) Update(ctx context.Context, res *registry.Resource, obj runtime.Object, expectedRev int64) (*Entry, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	val, err := encode(res, obj)
	if err != nil {
		return nil, err
	}
	kv, err := s.st.Update(ctx, res.Key(acc.GetNamespace(), acc.GetName()), val, expectedRev)
	if err != nil {
		return nil, APIError(err, res, acc.GetName())
	}
	return written(obj, acc, servedEncoding(res, val), kv.ModRevision)
}

// Delete removes an object if its stored revision is expectedRev (0: any)
// and returns the object as it was.
func (s *Storage) Delete(ctx context.Context, res *registry.Resource, namespace, name string, expectedRev int64) (*Entry, error) {
	prev, rev, err := s.st.Delete(ctx, res.Key(namespace, name), expectedRev)
	if err != nil {
		return nil, APIError(err, res, name)
	}
	prev.ModRevision = rev // the deleted object is reported at the delete's revision
	return decodeOrInternal(res, prev)
}

// UpdateFunc computes the new object from the current one (a private copy
// the function may change). Returning nil, nil means "no change".
type UpdateFunc func(current runtime.Object) (runtime.Object, error)

// GuaranteedUpdate reads the object, applies fn and writes the result with
// compare-and-swap, retrying on conflict: the read-modify-write every patch
// and status update needs. The first attempt starts from the watch cache's
// decoded copy, sparing a store read and a decode; the write's CAS catches
// a stale copy, and whatever fn decided from one (an error, no change) is
// decided again from the store before it counts.
func (s *Storage) GuaranteedUpdate(ctx context.Context, res *registry.Resource, namespace, name string, fn UpdateFunc) (*Entry, error) {
	cur := s.cache.Get(res, namespace, name)
	fresh := cur == nil
	for attempt := 0; ; attempt++ {
		if cur == nil {
			var err error
			if cur, err = s.Get(ctx, res, namespace, name); err != nil {
				return nil, err
			}
			fresh = true
		}
		next, err := fn(cur.Obj.DeepCopyObject())
		if (err != nil || next == nil) && !fresh {
			cur = nil
			continue
		}
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		e, err := s.Update(ctx, res, next, cur.Rev)
		if err == nil || !apierrors.IsConflict(err) || attempt >= 16 {
			return e, err
		}
		if ctx.Err() != nil {
			return nil, APIError(ctx.Err(), res, name)
		}
		cur = nil
	}
}

func decodeOrInternal(res *registry.Resource, kv store.KeyValue) (*Entry, error) {
	e, err := Decode(res, kv)
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		return nil, status.(error) // a conversion webhook's error says it all
	case err != nil:
		return nil, apierrors.NewInternalError(err)
	}
	return e, nil
}
