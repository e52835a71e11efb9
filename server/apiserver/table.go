package apiserver

import (
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/printers"
	"skiff/server/storage"
)

// table renders entries as the metav1.Table kubectl prints. Each row
// carries the object as asked by includeObject (Metadata by default).
func (s *Server) table(q *request, entries []*storage.Entry, rev int64, cont string, remaining *int64) (*metav1.Table, error) {
	include := metav1.IncludeObjectPolicy(q.r.URL.Query().Get("includeObject"))
	switch include {
	case "":
		include = metav1.IncludeMetadata
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		return nil, apierrors.NewBadRequest("includeObject must be one of None, Metadata or Object")
	}
	p, _ := printers.For(q.res.GVK().GroupKind())
	if t := q.res.Table; t != nil {
		p = printers.Printer{Columns: t.Columns, Cells: func(obj runtime.Object, _ time.Time) ([]any, error) { return t.Cells(obj) }}
	}
	objs := make([]runtime.Object, len(entries))
	for i, e := range entries {
		objs[i] = e.Obj
		if c := q.res.Convert; c != nil && q.res.Table == nil {
			// built-in printers print the version objects are stored in;
			// a row's own Table prints its own version
			stored, err := c.ToStorage(e.Obj)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			objs[i] = stored
		}
	}
	rows, err := printers.Rows(p, objs, time.Now())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	for i, e := range entries {
		switch include {
		case metav1.IncludeObject:
			rows[i].Object = runtime.RawExtension{Raw: e.Raw}
		case metav1.IncludeMetadata:
			rows[i].Object = runtime.RawExtension{Object: partial(e.Obj)}
		}
	}
	t := &metav1.Table{
		TypeMeta:          metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ColumnDefinitions: p.Columns,
		Rows:              rows,
	}
	if rev > 0 {
		t.ResourceVersion = strconv.FormatInt(rev, 10)
	}
	t.Continue, t.RemainingItemCount = cont, remaining
	return t, nil
}

func (s *Server) writeTable(q *request, entries []*storage.Entry, rev int64, cont string, remaining *int64, single bool) {
	if single {
		rev = 0
	}
	t, err := s.table(q, entries, rev, cont, remaining)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeJSON(q.w, q.r, http.StatusOK, t)
}

// partial is an object's metadata alone, as PartialObjectMetadata.
func partial(obj runtime.Object) *metav1.PartialObjectMetadata {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	p := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}}
	p.ObjectMeta = metav1.ObjectMeta{
		Name: acc.GetName(), GenerateName: acc.GetGenerateName(), Namespace: acc.GetNamespace(),
		UID: acc.GetUID(), ResourceVersion: acc.GetResourceVersion(), Generation: acc.GetGeneration(),
		CreationTimestamp: acc.GetCreationTimestamp(), DeletionTimestamp: acc.GetDeletionTimestamp(),
		DeletionGracePeriodSeconds: acc.GetDeletionGracePeriodSeconds(), Labels: acc.GetLabels(),
		Annotations: acc.GetAnnotations(), OwnerReferences: acc.GetOwnerReferences(),
		Finalizers: acc.GetFinalizers(), ManagedFields: acc.GetManagedFields(),
	}
	return p
}

// writePartial serves PartialObjectMetadata(List), which metadata-only
// clients (garbage collectors, kubectl's metadata client) ask for.
func (s *Server) writePartial(q *request, entries []*storage.Entry, rev int64, cont string, remaining *int64, single bool) {
	if single {
		writeJSON(q.w, q.r, http.StatusOK, partial(entries[0].Obj))
		return
	}
	list := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}}
	list.ResourceVersion, list.Continue, list.RemainingItemCount = strconv.FormatInt(rev, 10), cont, remaining
	for _, e := range entries {
		if p := partial(e.Obj); p != nil {
			list.Items = append(list.Items, *p)
		}
	}
	writeJSON(q.w, q.r, http.StatusOK, list)
}
