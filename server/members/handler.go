// Package members manages the servers of an HA cluster, the members of its
// embedded Raft store (store/raft): Handler serves the /v1-skiff/members
// API that `skiff server members` uses, and NodeController removes a
// server's member when its Node is deleted (`kubectl delete node`).
//
// Handler does no authentication or authorization: it is mounted behind
// the API server's, as a non-resource URL only system:masters may use.
package members

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/store"
	"skiff/store/raft"
)

// Path is the members collection; Path + "/" + name is one member.
const Path = "/v1-skiff/members"

// Cluster is the membership of the replicated store; *raft.Store
// implements it.
type Cluster interface {
	// Members lists the members.
	Members(ctx context.Context) ([]raft.Member, error)
	// RemoveMember removes a member (nothing if it is not one).
	RemoveMember(ctx context.Context, id string) error
}

// MemberList is the body of GET /v1-skiff/members.
type MemberList struct {
	Members []Member `json:"members"`
}

// Member is one server of the cluster. Name is its member ID, the
// server's node name.
type Member struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
	Leader  bool   `json:"leader"`
}

// resource names the members in Status messages (`members "x" not found`)
// and details.
var resource = schema.GroupResource{Resource: "members"}

// Handler serves GET Path (the members, by name) and DELETE Path/{name}
// (remove a member). Every failure is a metav1.Status: 404 for no such
// member, 400 for removing the last member or the last voter, 503 with
// Retry-After when the cluster has no leader or quorum
// (store.ErrUnavailable), 405 for another method, 500 otherwise.
func Handler(c Cluster) http.Handler { return &handler{cluster: c} }

type handler struct{ cluster Cluster }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, Path)
	switch {
	case ok && (rest == "" || rest == "/"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
		h.list(w, r)
	case ok && len(rest) > 1 && rest[0] == '/' && !strings.Contains(rest[1:], "/"):
		if r.Method != http.MethodDelete {
			methodNotAllowed(w, r, "DELETE")
			return
		}
		h.remove(w, r, rest[1:])
	default:
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
	}
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	ms, err := h.cluster.Members(r.Context())
	if err != nil {
		writeStatus(w, statusFor(fmt.Errorf("list members: %w", err)))
		return
	}
	out := MemberList{Members: make([]Member, 0, len(ms))}
	for _, m := range ms {
		out.Members = append(out.Members, Member{Name: m.ID, Address: m.Address, Voter: m.Voter, Leader: m.Leader})
	}
	slices.SortFunc(out.Members, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) remove(w http.ResponseWriter, r *http.Request, name string) {
	ms, err := h.cluster.Members(r.Context())
	if err != nil {
		writeStatus(w, statusFor(fmt.Errorf("list members: %w", err)))
		return
	}
	if !isMember(ms, name) {
		writeStatus(w, apierrors.NewNotFound(resource, name))
		return
	}
	if reason := refusal(ms, name); reason != "" {
		writeStatus(w, apierrors.NewBadRequest(reason))
		return
	}
	if err := h.cluster.RemoveMember(r.Context(), name); err != nil {
		writeStatus(w, statusFor(fmt.Errorf("remove member %q: %w", name, err)))
		return
	}
	writeJSON(w, http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Code:     http.StatusOK,
		Message:  fmt.Sprintf("member %q removed", name),
		Details:  &metav1.StatusDetails{Name: name, Kind: resource.Resource},
	})
}

func isMember(ms []raft.Member, name string) bool {
	return slices.ContainsFunc(ms, func(m raft.Member) bool { return m.ID == name })
}

// refusal says why removing member name would be meaningless, or "": the
// cluster would have no member left, or no voter to elect a leader.
func refusal(ms []raft.Member, name string) string {
	voters := 0
	voter := false
	for _, m := range ms {
		if m.Voter {
			voters++
			voter = voter || m.ID == name
		}
	}
	switch {
	case len(ms) == 1:
		return fmt.Sprintf("cannot remove %q: it is the cluster's only member", name)
	case voter && voters == 1:
		return fmt.Sprintf("cannot remove %q: it is the cluster's only voter", name)
	}
	return ""
}

// statusFor is the Status of a failure of the cluster: 503 when it cannot
// serve now (no leader or quorum, or the store is closing), 500 otherwise.
func statusFor(err error) *apierrors.StatusError {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) {
		se := apierrors.NewServiceUnavailable(err.Error())
		se.ErrStatus.Details = &metav1.StatusDetails{Kind: resource.Resource, RetryAfterSeconds: 1}
		return se
	}
	return apierrors.NewInternalError(err)
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeStatus(w, apierrors.NewMethodNotSupported(resource, r.Method))
}

// writeStatus writes a failure as the API server does: a v1 Status with
// its code, and Retry-After when the Status gives one.
func writeStatus(w http.ResponseWriter, se *apierrors.StatusError) {
	s := se.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	if s.Status == "" {
		s.Status = metav1.StatusFailure
	}
	if s.Code == 0 {
		s.Code = http.StatusInternalServerError
	}
	if s.Details != nil && s.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(s.Details.RetryAfterSeconds))
	}
	writeJSON(w, int(s.Code), &s)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // not with these types
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
