package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The group this server serves, as an APIService would name it.
const (
	Group        = "wardle.skiff.test"
	Version      = "v1alpha1"
	GroupVersion = Group + "/" + Version
	resource     = "flunders"
)

// created is every flunder's creation time: fixed, so that answers are
// comparable.
var created = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))

// Flunder is the one kind served. It is read-only; its status tells who
// read it, as the server received the identity from the aggregator.
type Flunder struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            FlunderStatus `json:"status"`
}

// FlunderStatus is the caller's identity as authenticated here.
type FlunderStatus struct {
	Caller authenticationv1.UserInfo `json:"caller"`
}

// FlunderList is a list of flunders.
type FlunderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Flunder `json:"items"`
}

// api serves discovery and flunders to callers the front proxy vouches for.
type api struct {
	// auth is the current requestheader configuration (nil until read).
	auth *atomic.Pointer[RequestHeaderConfig]
	// flunders are the objects served, as namespace/name.
	flunders []types.NamespacedName
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller, err := authenticate(r, a.auth.Load())
	if err != nil {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized: "+err.Error(), nil)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 1 || parts[0] != "apis" {
		writeNotFound(w, r.URL.Path)
		return
	}
	parts = parts[1:]
	switch {
	case len(parts) == 0:
		a.discovery(w, r, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{group()}})
	case len(parts) == 1 && parts[0] == Group:
		g := group()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		a.discovery(w, r, &g)
	case len(parts) == 2 && parts[0] == Group && parts[1] == Version:
		a.discovery(w, r, resourceList())
	case len(parts) >= 3 && parts[0] == Group && parts[1] == Version:
		a.serveFlunders(w, r, parts[2:], caller)
	default:
		writeNotFound(w, r.URL.Path)
	}
}

func group() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: GroupVersion, Version: Version}
	return metav1.APIGroup{Name: Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

func resourceList() *metav1.APIResourceList {
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: GroupVersion,
		APIResources: []metav1.APIResource{{
			Name: resource, SingularName: "flunder", Namespaced: true, Kind: "Flunder",
			Verbs: metav1.Verbs{"get", "list"},
		}},
	}
}

func (a *api) discovery(w http.ResponseWriter, r *http.Request, body any) {
	if r.Method != http.MethodGet {
		writeMethodNotAllowed(w, r)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// serveFlunders answers rest, the path after /apis/<group>/<version>/:
// flunders, namespaces/<ns>/flunders or namespaces/<ns>/flunders/<name>.
func (a *api) serveFlunders(w http.ResponseWriter, r *http.Request, rest []string, caller authenticationv1.UserInfo) {
	var ns, name string
	switch {
	case len(rest) == 1 && rest[0] == resource:
	case len(rest) == 3 && rest[0] == "namespaces" && rest[2] == resource:
		ns = rest[1]
	case len(rest) == 4 && rest[0] == "namespaces" && rest[2] == resource:
		ns, name = rest[1], rest[3]
	default:
		writeNotFound(w, r.URL.Path)
		return
	}
	if r.Method != http.MethodGet {
		writeMethodNotAllowed(w, r)
		return
	}
	if name != "" {
		for _, f := range a.flunders {
			if f.Namespace == ns && f.Name == name {
				writeJSON(w, http.StatusOK, flunder(f, caller))
				return
			}
		}
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s.%s %q not found", resource, Group, name),
			&metav1.StatusDetails{Name: name, Group: Group, Kind: resource})
		return
	}
	list := FlunderList{TypeMeta: metav1.TypeMeta{Kind: "FlunderList", APIVersion: GroupVersion}, ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []Flunder{}}
	for _, f := range a.flunders {
		if ns == "" || f.Namespace == ns {
			list.Items = append(list.Items, flunder(f, caller))
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func flunder(f types.NamespacedName, caller authenticationv1.UserInfo) Flunder {
	return Flunder{
		TypeMeta: metav1.TypeMeta{Kind: "Flunder", APIVersion: GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name: f.Name, Namespace: f.Namespace, ResourceVersion: "1", CreationTimestamp: created,
			UID: flunderUID(f),
		},
		Status: FlunderStatus{Caller: caller},
	}
}

// flunderUID is a stable UUID-shaped uid derived from the object's key, so
// that a flunder keeps its uid across reads and restarts.
func flunderUID(f types.NamespacedName) types.UID {
	h := sha256.Sum256([]byte(f.String()))
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeStatus answers an error as the API does: a metav1.Status.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string, details *metav1.StatusDetails) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg, Details: details,
	})
}

func writeNotFound(w http.ResponseWriter, path string) {
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the server could not find the requested resource (%s)", path), nil)
}

func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodGet)
	writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("%s is not supported: the server does not allow this method on the requested resource", r.Method), nil)
}
