// Package audit is the API server's audit log, as kube-apiserver's: an
// audit.k8s.io/v1 Policy file decides, per request, at which level
// (None, Metadata, Request, RequestResponse) its Event is recorded and
// which stages are left out; a Recorder in the request's context collects
// the event (and the annotations admission plugins add to it through
// AddAnnotation); a Sink such as the JSON-lines log file takes each stage.
//
// The types mirror upstream's audit.k8s.io/v1 JSON, so that log shippers
// and tools written for kube-apiserver's audit log read this one. They are
// written here because k8s.io/apiserver, where upstream's live, is a
// server component this project does not depend on.
package audit

import (
	"encoding/json"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// GroupVersion is the API version of the policy file and the events.
const GroupVersion = "audit.k8s.io/v1"

// HeaderAuditID is the request and response header that carries a
// request's audit ID (upstream's spelling; HTTP headers are
// case-insensitive).
const HeaderAuditID = "Audit-ID"

// Level is how much of a request an event records.
type Level string

// The levels, from nothing to everything.
const (
	// LevelNone records nothing.
	LevelNone Level = "None"
	// LevelMetadata records who did what to which object, and the result,
	// but neither body.
	LevelMetadata Level = "Metadata"
	// LevelRequest adds the request body.
	LevelRequest Level = "Request"
	// LevelRequestResponse adds the response body.
	LevelRequestResponse Level = "RequestResponse"
)

func (l Level) ordinal() int {
	switch l {
	case LevelMetadata:
		return 1
	case LevelRequest:
		return 2
	case LevelRequestResponse:
		return 3
	}
	return 0
}

// Less reports whether l records less than o.
func (l Level) Less(o Level) bool { return l.ordinal() < o.ordinal() }

// Stage is a point in handling a request at which an event is written.
type Stage string

// The stages.
const (
	// StageRequestReceived is written as soon as the request is
	// authenticated, before anything else is done with it.
	StageRequestReceived Stage = "RequestReceived"
	// StageResponseStarted is written for long-running requests (watch,
	// exec, logs, proxy) once the response headers are sent.
	StageResponseStarted Stage = "ResponseStarted"
	// StageResponseComplete is written when the response is done.
	StageResponseComplete Stage = "ResponseComplete"
	// StagePanic is written instead when handling the request panicked.
	StagePanic Stage = "Panic"
)

// Event is audit.k8s.io/v1 Event: what one stage of one request records.
type Event struct {
	metav1.TypeMeta `json:",inline"`
	Level           Level     `json:"level"`
	AuditID         types.UID `json:"auditID"`
	Stage           Stage     `json:"stage"`
	RequestURI      string    `json:"requestURI"`
	Verb            string    `json:"verb"`
	// User is who was authenticated; ImpersonatedUser whom they acted as.
	User             authenticationv1.UserInfo  `json:"user"`
	ImpersonatedUser *authenticationv1.UserInfo `json:"impersonatedUser,omitempty"`
	SourceIPs        []string                   `json:"sourceIPs,omitempty"`
	UserAgent        string                     `json:"userAgent,omitempty"`
	ObjectRef        *ObjectReference           `json:"objectRef,omitempty"`
	// ResponseStatus has the code of every response, and the rest of a
	// Status when the response was one.
	ResponseStatus *metav1.Status `json:"responseStatus,omitempty"`
	// RequestObject (level Request and up) and ResponseObject (level
	// RequestResponse) are the bodies, as JSON.
	RequestObject            json.RawMessage   `json:"requestObject,omitempty"`
	ResponseObject           json.RawMessage   `json:"responseObject,omitempty"`
	RequestReceivedTimestamp metav1.MicroTime  `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime  `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations,omitempty"`
}

// ObjectReference is the object a resource request is about.
type ObjectReference struct {
	Resource        string    `json:"resource,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Name            string    `json:"name,omitempty"`
	UID             types.UID `json:"uid,omitempty"`
	APIGroup        string    `json:"apiGroup,omitempty"`
	APIVersion      string    `json:"apiVersion,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	Subresource     string    `json:"subresource,omitempty"`
}

// Policy is audit.k8s.io/v1 Policy: the rules deciding each request's
// level. The first rule that matches a request decides; a request no rule
// matches is not audited.
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Rules             []PolicyRule `json:"rules"`
	// OmitStages are left out for every request (in addition to a rule's).
	OmitStages []Stage `json:"omitStages,omitempty"`
	// OmitManagedFields drops metadata.managedFields from logged bodies
	// unless a rule says otherwise.
	OmitManagedFields bool `json:"omitManagedFields,omitempty"`
}

// PolicyRule selects requests by who made them and what they are about;
// an empty list matches everything.
type PolicyRule struct {
	Level      Level    `json:"level"`
	Users      []string `json:"users,omitempty"`
	UserGroups []string `json:"userGroups,omitempty"`
	Verbs      []string `json:"verbs,omitempty"`
	// Resources and Namespaces select resource requests; NonResourceURLs
	// the others (a trailing * matches a prefix). A rule has one kind.
	Resources         []GroupResources `json:"resources,omitempty"`
	Namespaces        []string         `json:"namespaces,omitempty"`
	NonResourceURLs   []string         `json:"nonResourceURLs,omitempty"`
	OmitStages        []Stage          `json:"omitStages,omitempty"`
	OmitManagedFields *bool            `json:"omitManagedFields,omitempty"`
}

// GroupResources selects resources of one API group ("" core, "*" any):
// "pods", "pods/log", "pods/*" (pods and their subresources), "*/status"
// (that subresource of any resource) or "*" (everything); resourceNames
// narrow to objects of those names.
type GroupResources struct {
	Group         string   `json:"group,omitempty"`
	Resources     []string `json:"resources,omitempty"`
	ResourceNames []string `json:"resourceNames,omitempty"`
}
