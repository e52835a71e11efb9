package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/store"
)

// request is one resource request, resolved against the registry.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	info requestInfo
	res  *registry.Resource
	// applied marks a server-side apply: its managedFields are already
	// computed, so the write is not tracked again as an update.
	applied bool
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, info requestInfo) {
	res, ok := s.reg.Lookup(info.Group, info.Version, info.Plural)
	if !ok || (!res.Namespaced && info.Namespace != "") {
		writeError(w, r, apierrors.NewNotFound(schema.GroupResource{Group: info.Group, Resource: info.Plural}, info.Name))
		return
	}
	req := &request{w: w, r: r, info: info, res: res}
	if info.Subresource != "" {
		s.serveSubresource(req)
		return
	}
	if !res.HasVerb(info.Verb) {
		writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Group: res.Group, Resource: res.Name}, info.Verb))
		return
	}
	if res.Compute != nil {
		s.serveComputed(req) // computed.go
		return
	}
	switch info.Verb {
	case "get":
		s.get(req)
	case "list":
		s.list(req)
	case "watch":
		s.watch(req)
	case "create":
		switch {
		case res.Group == "" && res.Name == "bindings":
			s.bindings(req) // subresource.go
		case !s.review(req):
			s.create(req)
		}
	case "update":
		s.update(req)
	case "patch":
		s.patch(req)
	case "delete":
		s.delete(req)
	case "deletecollection":
		s.deleteCollection(req)
	default:
		writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Group: res.Group, Resource: res.Name}, info.Verb))
	}
}

func (s *Server) get(q *request) {
	e, err := s.st.Get(q.r.Context(), q.res, q.info.Namespace, q.info.Name)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	s.writeEntries(q, []*storage.Entry{e}, 0, "", nil, true)
}

// listOptions are the query parameters of list and watch.
type listOptions struct {
	pred            storage.Predicate
	limit           int64
	cont            string
	rv              string
	rvMatch         string
	bookmarks       bool
	initialEvents   *bool
	timeoutSeconds  int64
	includeMetadata bool
}

func (s *Server) parseListOptions(q *request) (listOptions, error) {
	v := q.r.URL.Query()
	o := listOptions{cont: v.Get("continue"), rv: v.Get("resourceVersion"), rvMatch: v.Get("resourceVersionMatch")}
	o.pred.Namespace = q.info.Namespace
	var err error
	if o.pred.Label, err = labels.Parse(v.Get("labelSelector")); err != nil {
		return o, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	fs := v.Get("fieldSelector")
	if q.info.Name != "" { // watch on a named object
		fs = joinSelectors(fs, "metadata.name="+q.info.Name)
	}
	if o.pred.Field, err = fields.ParseSelector(fs); err != nil {
		return o, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	if err := checkFieldLabels(q.res, o.pred.Field); err != nil {
		return o, err
	}
	if l := v.Get("limit"); l != "" {
		if o.limit, err = strconv.ParseInt(l, 10, 64); err != nil || o.limit < 0 {
			return o, apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", l))
		}
	}
	if t := v.Get("timeoutSeconds"); t != "" {
		if o.timeoutSeconds, err = strconv.ParseInt(t, 10, 64); err != nil || o.timeoutSeconds < 0 {
			return o, apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", t))
		}
	}
	o.bookmarks = v.Get("allowWatchBookmarks") == "true"
	if si := v.Get("sendInitialEvents"); si != "" {
		b := si == "true"
		o.initialEvents = &b
	}
	switch o.rvMatch {
	case "", string(metav1.ResourceVersionMatchNotOlderThan), string(metav1.ResourceVersionMatchExact):
	default:
		return o, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersionMatch %q", o.rvMatch))
	}
	if o.rvMatch != "" && o.rv == "" && o.initialEvents == nil {
		return o, apierrors.NewBadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	return o, nil
}

func joinSelectors(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

// checkFieldLabels refuses field selectors on fields the resource does not
// index, with upstream's message.
func checkFieldLabels(res *registry.Resource, sel fields.Selector) error {
	var allowed map[string]string
	if res.Fields != nil {
		allowed = res.Fields(res.New())
	}
	for _, req := range sel.Requirements() {
		switch req.Field {
		case "metadata.name":
			continue
		case "metadata.namespace":
			if res.Namespaced {
				continue
			}
		}
		if _, ok := allowed[req.Field]; !ok {
			return apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return nil
}

func (s *Server) list(q *request) {
	o, err := s.parseListOptions(q)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	ctx := q.r.Context()
	fromStore := o.cont != "" || (o.limit > 0 && o.rv == "") || o.rvMatch == string(metav1.ResourceVersionMatchExact)
	if fromStore {
		entries, rev, cont, remaining, err := s.listFromStore(q, o)
		if err != nil {
			writeError(q.w, q.r, err)
			return
		}
		s.writeEntries(q, entries, rev, cont, remaining, false)
		return
	}
	switch o.rv {
	case "":
		err = s.st.Cache().WaitCurrent(ctx)
	case "0":
	default:
		var rev int64
		if rev, err = storage.ParseResourceVersion(o.rv); err == nil {
			err = s.st.Cache().WaitFor(ctx, rev)
		}
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	entries, rev, err := s.st.Cache().List(q.res, o.pred)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	s.writeEntries(q, entries, rev, "", nil, false)
}

// listFromStore pages through the store at one revision, filtering, until
// it has limit matches: a paginated list is a consistent snapshot.
func (s *Server) listFromStore(q *request, o listOptions) ([]*storage.Entry, int64, string, *int64, error) {
	ctx := q.r.Context()
	opts := store.ListOptions{Prefix: q.res.ListPrefix(q.info.Namespace), Limit: o.limit, Continue: o.cont}
	if o.cont == "" && o.rv != "" && o.rv != "0" {
		rev, err := storage.ParseResourceVersion(o.rv)
		if err != nil {
			return nil, 0, "", nil, err
		}
		opts.Revision = rev
	}
	var out []*storage.Entry
	for {
		page, err := s.st.Store().List(ctx, opts)
		if err != nil {
			return nil, 0, "", nil, s.st.ListError(ctx, err, q.res, opts.Prefix, opts.Continue)
		}
		for _, kv := range page.Items {
			e, err := storage.Decode(q.res, kv)
			if err != nil {
				return nil, 0, "", nil, apierrors.NewInternalError(err)
			}
			if o.pred.Matches(q.res, e) {
				out = append(out, e)
			}
		}
		if page.Continue == "" || (o.limit > 0 && int64(len(out)) >= o.limit) {
			var remaining *int64
			if page.Continue != "" && o.pred.Everything() {
				remaining = &page.RemainingCount
			}
			return out, page.Revision, page.Continue, remaining, nil
		}
		opts.Continue = page.Continue
	}
}

// writeEntries renders objects as one object (single) or a list, in the
// representation the client asked for.
func (s *Server) writeEntries(q *request, entries []*storage.Entry, rev int64, cont string, remaining *int64, single bool) {
	out, err := negotiate(q.r)
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	switch out {
	case outTable:
		s.writeTable(q, entries, rev, cont, remaining, single)
		return
	case outPartialMetadata:
		s.writePartial(q, entries, rev, cont, remaining, single)
		return
	case outProtobuf:
		if single && writeEntryProto(q.w, q.res, http.StatusOK, entries[0]) {
			return
		}
		if !single {
			if b, ok := protoList(q.res, entries, listMeta(rev, cont, remaining)); ok {
				writeProto(q.w, http.StatusOK, b)
				return
			}
		}
	}
	if single {
		writeRaw(q.w, q.r, http.StatusOK, entries[0].Raw)
		return
	}
	// A list is assembled from each object's cached encoding: no object is
	// encoded again per request.
	meta, _ := json.Marshal(metav1.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10), Continue: cont, RemainingItemCount: remaining})
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"kind":%q,"apiVersion":%q,"metadata":%s,"items":[`, q.res.ListKind, q.res.GroupVersion(), meta)
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.Raw)
	}
	b.WriteString("]}")
	writeRaw(q.w, q.r, http.StatusOK, b.Bytes())
}
