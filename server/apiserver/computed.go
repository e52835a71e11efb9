package apiserver

import (
	"encoding/json"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"skiff/server/storage"
)

// serveComputed answers get and list of a resource whose objects are
// computed at each request (registry.Resource.Compute), not stored:
// ComponentStatus. Label and field selectors apply to the computed objects
// as to stored ones; there is no resourceVersion to page or watch from.
func (s *Server) serveComputed(q *request) {
	o, err := s.parseListOptions(q)
	if q.info.Verb == "get" {
		err = nil // a get takes no list options
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	objs, err := q.res.Compute(q.r.Context())
	if err != nil {
		writeError(q.w, q.r, apierrors.NewInternalError(err))
		return
	}
	entries := make([]*storage.Entry, 0, len(objs))
	for _, obj := range objs {
		acc, err := meta.Accessor(obj)
		if err != nil {
			writeError(q.w, q.r, apierrors.NewInternalError(err))
			return
		}
		if q.info.Verb == "get" && acc.GetName() != q.info.Name {
			continue
		}
		obj.GetObjectKind().SetGroupVersionKind(q.res.GVK())
		raw, err := json.Marshal(obj)
		if err != nil {
			writeError(q.w, q.r, apierrors.NewInternalError(err))
			return
		}
		e := &storage.Entry{Obj: obj, Raw: raw}
		if q.info.Verb == "list" && !o.pred.Matches(q.res, e) {
			continue
		}
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool { return computedName(entries[i]) < computedName(entries[j]) })
	switch {
	case q.info.Verb == "list":
		s.writeEntries(q, entries, 0, "", nil, false)
	case len(entries) == 0:
		writeError(q.w, q.r, apierrors.NewNotFound(q.res.GVR().GroupResource(), q.info.Name))
	default:
		s.writeEntries(q, entries[:1], 0, "", nil, true)
	}
}

func computedName(e *storage.Entry) string {
	acc, _ := meta.Accessor(e.Obj)
	return acc.GetName()
}
