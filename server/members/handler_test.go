package members

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/store"
	"skiff/store/raft"
)

// fakeCluster is a Cluster in memory whose calls can be made to fail.
type fakeCluster struct {
	mu      sync.Mutex
	members []raft.Member
	// membersErr fails every Members call, membersErrs the next ones
	// (one each, in order); removeErrs fail the next RemoveMember calls.
	membersErr  error
	membersErrs []error
	removeErrs  []error
	removed     []string // every RemoveMember call, failed or not
}

func (f *fakeCluster) Members(ctx context.Context) ([]raft.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.membersErr != nil {
		return nil, f.membersErr
	}
	if len(f.membersErrs) > 0 {
		err := f.membersErrs[0]
		f.membersErrs = f.membersErrs[1:]
		if err != nil {
			return nil, err
		}
	}
	return slices.Clone(f.members), nil
}

func (f *fakeCluster) RemoveMember(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	if len(f.removeErrs) > 0 {
		err := f.removeErrs[0]
		f.removeErrs = f.removeErrs[1:]
		if err != nil {
			return err
		}
	}
	f.members = slices.DeleteFunc(f.members, func(m raft.Member) bool { return m.ID == id })
	return nil
}

func (f *fakeCluster) removals() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func three() []raft.Member {
	return []raft.Member{
		{ID: "c", Address: "10.0.0.3:2380", Voter: true},
		{ID: "a", Address: "10.0.0.1:2380", Voter: true, Leader: true},
		{ID: "b", Address: "10.0.0.2:2380", Voter: true},
	}
}

var errUnavailable = fmt.Errorf("membership change: %w", store.ErrUnavailable)

func TestHandler(t *testing.T) {
	tests := []struct {
		name         string
		members      []raft.Member
		membersErr   error
		removeErrs   []error
		method, path string
		wantCode     int
		wantBody     string // exact body, for successes
		wantMessage  string // substring of a Status' message
		wantReason   metav1.StatusReason
		wantRemoved  []string // RemoveMember calls
		wantHeader   map[string]string
		wantMembers  []raft.Member // the cluster afterwards (nil: unchanged)
	}{
		{
			name: "list returns the members sorted by name", members: three(), method: "GET", path: Path, wantCode: 200,
			wantBody: `{"members":[{"name":"a","address":"10.0.0.1:2380","voter":true,"leader":true},` +
				`{"name":"b","address":"10.0.0.2:2380","voter":true,"leader":false},` +
				`{"name":"c","address":"10.0.0.3:2380","voter":true,"leader":false}]}` + "\n",
		},
		{
			name: "list with a trailing slash is the list", members: three()[:1], method: "GET", path: Path + "/", wantCode: 200,
			wantBody: `{"members":[{"name":"c","address":"10.0.0.3:2380","voter":true,"leader":false}]}` + "\n",
		},
		{name: "list of no members is an empty array", method: "GET", path: Path, wantCode: 200, wantBody: `{"members":[]}` + "\n"},
		{
			name: "list without a quorum is 503 with Retry-After", membersErr: errUnavailable, method: "GET", path: Path,
			wantCode: 503, wantReason: metav1.StatusReasonServiceUnavailable, wantMessage: "store: unavailable", wantHeader: map[string]string{"Retry-After": "1"},
		},
		{
			name: "list on a closed store is 503", membersErr: store.ErrClosed, method: "GET", path: Path,
			wantCode: 503, wantReason: metav1.StatusReasonServiceUnavailable, wantHeader: map[string]string{"Retry-After": "1"},
		},
		{
			name: "list failing otherwise is 500", membersErr: errors.New("disk on fire"), method: "GET", path: Path,
			wantCode: 500, wantReason: metav1.StatusReasonInternalError, wantMessage: "disk on fire", wantHeader: map[string]string{"Retry-After": ""},
		},
		{
			name: "delete removes the member", members: three(), method: "DELETE", path: Path + "/b",
			wantCode: 200, wantRemoved: []string{"b"}, wantMessage: `member "b" removed`,
			wantMembers: []raft.Member{three()[0], three()[1]},
		},
		{
			name: "delete of the leader removes it", members: three(), method: "DELETE", path: Path + "/a",
			wantCode: 200, wantRemoved: []string{"a"}, wantMembers: []raft.Member{three()[0], three()[2]},
		},
		{
			name: "delete of no such member is 404 and removes nothing", members: three(), method: "DELETE", path: Path + "/zz",
			wantCode: 404, wantReason: metav1.StatusReasonNotFound, wantMessage: `members "zz" not found`,
		},
		{
			name: "delete of the only member is 400", members: three()[:1], method: "DELETE", path: Path + "/c",
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "only member",
		},
		{
			name: "delete of the only voter is 400", method: "DELETE", path: Path + "/a",
			members:  []raft.Member{{ID: "a", Voter: true}, {ID: "b"}},
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "only voter",
		},
		{
			name: "delete of a non-voter beside one voter removes it", method: "DELETE", path: Path + "/b",
			members:  []raft.Member{{ID: "a", Voter: true}, {ID: "b"}},
			wantCode: 200, wantRemoved: []string{"b"}, wantMembers: []raft.Member{{ID: "a", Voter: true}},
		},
		{
			name: "delete without a quorum to list is 503", membersErr: errUnavailable, method: "DELETE", path: Path + "/b",
			wantCode: 503, wantReason: metav1.StatusReasonServiceUnavailable, wantHeader: map[string]string{"Retry-After": "1"},
		},
		{
			name: "delete the cluster cannot make now is 503 with Retry-After", members: three(), removeErrs: []error{errUnavailable},
			method: "DELETE", path: Path + "/b", wantRemoved: []string{"b"},
			wantCode: 503, wantReason: metav1.StatusReasonServiceUnavailable, wantMessage: `remove member "b"`, wantHeader: map[string]string{"Retry-After": "1"},
		},
		{
			name: "delete failing otherwise is 500", members: three(), removeErrs: []error{errors.New("boom")},
			method: "DELETE", path: Path + "/b", wantRemoved: []string{"b"},
			wantCode: 500, wantReason: metav1.StatusReasonInternalError, wantMessage: "boom",
		},
		{
			name: "post to the list is 405", members: three(), method: "POST", path: Path,
			wantCode: 405, wantReason: metav1.StatusReasonMethodNotAllowed, wantHeader: map[string]string{"Allow": "GET, HEAD"},
		},
		{
			name: "delete of the list is 405", members: three(), method: "DELETE", path: Path,
			wantCode: 405, wantReason: metav1.StatusReasonMethodNotAllowed,
		},
		{
			name: "get of a member is 405", members: three(), method: "GET", path: Path + "/a",
			wantCode: 405, wantReason: metav1.StatusReasonMethodNotAllowed, wantHeader: map[string]string{"Allow": "DELETE"},
		},
		{
			name: "put of a member is 405", members: three(), method: "PUT", path: Path + "/a",
			wantCode: 405, wantReason: metav1.StatusReasonMethodNotAllowed,
		},
		{
			name: "a deeper path is 404", members: three(), method: "DELETE", path: Path + "/a/b",
			wantCode: 404, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "an escaped slash in a name is 404", members: three(), method: "DELETE", path: Path + "/a%2Fb",
			wantCode: 404, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "another path is 404", members: three(), method: "GET", path: Path + "x",
			wantCode: 404, wantReason: metav1.StatusReasonNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{members: slices.Clone(tt.members), membersErr: tt.membersErr, removeErrs: tt.removeErrs}
			rec := httptest.NewRecorder()
			Handler(f).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			res := rec.Result()
			body := rec.Body.String()
			if res.StatusCode != tt.wantCode {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, res.StatusCode, body, tt.wantCode)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			for k, v := range tt.wantHeader {
				if got := res.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if tt.wantBody != "" {
				if body != tt.wantBody {
					t.Errorf("body = %s\nwant   %s", body, tt.wantBody)
				}
			} else {
				var s metav1.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
					t.Fatalf("body %q is not a Status: %v", body, err)
				}
				wantStatus := metav1.StatusFailure
				if tt.wantCode == 200 {
					wantStatus = metav1.StatusSuccess
				}
				if s.Kind != "Status" || s.APIVersion != "v1" || int(s.Code) != tt.wantCode || s.Status != wantStatus || s.Reason != tt.wantReason {
					t.Errorf("Status = %+v, want kind Status, apiVersion v1, code %d, status %s, reason %q", s, tt.wantCode, wantStatus, tt.wantReason)
				}
				if !strings.Contains(s.Message, tt.wantMessage) {
					t.Errorf("Status message = %q, want it to contain %q", s.Message, tt.wantMessage)
				}
			}
			if got := f.removals(); !slices.Equal(got, tt.wantRemoved) {
				t.Errorf("RemoveMember calls = %q, want %q", got, tt.wantRemoved)
			}
			want := tt.wantMembers
			if want == nil {
				want = tt.members
			}
			if !sameMembers(f.members, want) {
				t.Errorf("members afterwards = %+v, want %+v", f.members, want)
			}
		})
	}
}

func sameMembers(a, b []raft.Member) bool {
	key := func(m raft.Member) string { return m.ID }
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, func(x, y raft.Member) int { return strings.Compare(key(x), key(y)) })
	slices.SortFunc(b, func(x, y raft.Member) int { return strings.Compare(key(x), key(y)) })
	return slices.Equal(a, b)
}

// TestHandler_MountedOnTheAPIRouter checks the Extra keys server.go uses:
// chi patterns for the list and for one member.
func TestHandler_MountedOnTheAPIRouter(t *testing.T) {
	f := &fakeCluster{members: three()}
	r := chi.NewRouter()
	h := Handler(f)
	r.Handle(Path, h)
	r.Handle(Path+"/*", h)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "router 404", http.StatusTeapot) })
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", Path, 200},
		{"GET", Path + "/", 200},
		{"DELETE", Path + "/b", 200},
		{"DELETE", Path + "/zz", 404},
		{"GET", Path + "x", http.StatusTeapot},
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, rec.Code, rec.Body, tc.want)
		}
	}
	if got := f.removals(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("RemoveMember calls = %q, want [b]", got)
	}
}
