// Package storage keeps API objects in the state store: it encodes them,
// maps keys and resourceVersions to store keys and revisions, maps store
// errors to Kubernetes API errors (the one place that happens), and serves
// lists and watches from a watch cache fed by a single store watch.
package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"skiff/server/registry"
	"skiff/store"
)

// Entry is one object as the API server holds it: decoded, and encoded as
// served (with its resourceVersion). Entries are shared: never mutate Obj;
// DeepCopyObject it first.
type Entry struct {
	Obj runtime.Object
	Raw []byte
	Rev int64
	// Proto caches the object's protobuf encoding once a client asked for
	// it; set by the API server.
	Proto atomic.Pointer[[]byte]
}

// Storage reads and writes API objects.
type Storage struct {
	st    store.Store
	cache *Cache
}

// New returns a Storage over st, with its watch cache. Run the cache with
// Cache().Run before serving.
func New(st store.Store, reg *registry.Registry) *Storage {
	return &Storage{st: st, cache: newCache(st, reg)}
}

// Cache is the watch cache.
func (s *Storage) Cache() *Cache { return s.cache }

// Store is the underlying state store.
func (s *Storage) Store() store.Store { return s.st }

// Decode turns a stored value into an entry, stamping its resourceVersion.
func Decode(res *registry.Resource, kv store.KeyValue) (*Entry, error) {
	obj, err := decodeStored(res, kv.Value)
	if err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", res.Kind, kv.Key, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(res.GVK())
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", res.Kind, kv.Key, err)
	}
	acc.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
	raw, ok := stampResourceVersion(servedEncoding(res, kv.Value), kv.ModRevision)
	if !ok {
		if raw, err = json.Marshal(obj); err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", res.Kind, kv.Key, err)
		}
	}
	return &Entry{Obj: obj, Raw: raw, Rev: kv.ModRevision}, nil
}

// decodeStored decodes a stored value into an object of res's version,
// converting from the storage version for a converted row.
func decodeStored(res *registry.Resource, value []byte) (runtime.Object, error) {
	if res.Convert == nil {
		obj := res.New()
		return obj, kjson.UnmarshalCaseSensitivePreserveInts(value, obj)
	}
	stored := res.Convert.NewStored()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(value, stored); err != nil {
		return nil, err
	}
	return res.Convert.FromStorage(stored)
}

// servedEncoding is the stored value when it is also what clients of res
// get, nil when res converts (its objects are encoded afresh).
func servedEncoding(res *registry.Resource, value []byte) []byte {
	if res.Convert != nil {
		return nil
	}
	return value
}

// stampResourceVersion inserts metadata.resourceVersion into a stored
// object's JSON, which never holds one (see encode), instead of encoding the
// object again: serving an object costs no JSON encoding. Stored objects
// are encoded with kind, apiVersion and metadata first, so the first
// "metadata":{ is the object's own.
func stampResourceVersion(stored []byte, rev int64) ([]byte, bool) {
	const key = `"metadata":{`
	i := bytes.Index(stored, []byte(key))
	if i < 0 || bytes.Contains(stored[:i], []byte(`"spec"`)) {
		return nil, false
	}
	at := i + len(key)
	field := `"resourceVersion":"` + strconv.FormatInt(rev, 10) + `"`
	out := make([]byte, 0, len(stored)+len(field)+1)
	out = append(out, stored[:at]...)
	out = append(out, field...)
	if at < len(stored) && stored[at] != '}' {
		out = append(out, ',')
	}
	return append(out, stored[at:]...), true
}

// encode turns an object into its stored value: the resourceVersion is not
// stored, it is the store's revision.
func encode(res *registry.Resource, obj runtime.Object) ([]byte, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	defer acc.SetResourceVersion(rv)
	obj.GetObjectKind().SetGroupVersionKind(res.GVK())
	if res.Convert != nil {
		if obj, err = res.Convert.ToStorage(obj); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("convert %s: %w", res.Kind, err))
		}
		obj.GetObjectKind().SetGroupVersionKind(res.StorageGVK())
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode %s: %w", res.Kind, err))
	}
	return b, nil
}

// ParseResourceVersion reads a resourceVersion; "" and "0" are 0.
func ParseResourceVersion(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
	}
	return n, nil
}

func qualified(res *registry.Resource) schema.GroupResource {
	return schema.GroupResource{Group: res.Group, Resource: res.Name}
}

// APIError maps a store error to the Kubernetes error a client expects.
func APIError(err error, res *registry.Resource, name string) error {
	gr := qualified(res)
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return nil
	case errors.As(err, &status):
		return err
	case errors.Is(err, store.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, store.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, store.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(registryConflictMessage))
	case errors.Is(err, store.ErrCompacted):
		return apierrors.NewResourceExpired(fmt.Sprintf("The resourceVersion for the provided list is too old: %v", err))
	case errors.Is(err, store.ErrInvalidContinue):
		return apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	case errors.Is(err, store.ErrFutureRevision):
		return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %v", err), 1)
	case errors.Is(err, store.ErrUnavailable):
		// No quorum or no leader (HA store) or the datastore is down: the
		// write did not happen or its outcome is unknown; the client
		// should retry, possibly through another server.
		st := apierrors.NewServiceUnavailable(fmt.Sprintf("the store is unavailable: %v", err))
		st.ErrStatus.Details = &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource, Name: name, RetryAfterSeconds: 1}
		return st
	case errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError(err.Error(), 1)
	case errors.Is(err, context.Canceled):
		return apierrors.NewTimeoutError("request canceled", 0)
	}
	return apierrors.NewInternalError(err)
}

const registryConflictMessage = "the object has been modified; please apply your changes to the latest version and try again"
