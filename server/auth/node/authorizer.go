// Package node is the node authorizer: it limits each kubelet
// (system:node:<name> in group system:nodes) to its own Node and Lease, the
// pods bound to it, and the Secrets, ConfigMaps, PersistentVolumeClaims and
// service-account tokens those pods use, as upstream's Node authorizer
// does. Requests of other users, and node requests it has no rule for, go
// to the next authorizer (RBAC).
package node

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"skiff/server/auth"
)

// Graph answers which pods are bound to a node. The API server backs it
// with its watch cache.
type Graph interface {
	// PodsOnNode returns the pods whose spec.nodeName is node.
	PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error)
	// Pod returns the named pod, or nil and no error when it does not
	// exist.
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// Sync waits until the answers reflect every committed write. It is
	// called before a denial, so a pod bound a moment ago is seen.
	Sync(ctx context.Context) error
}

// Next is the authorizer consulted when the node authorizer has no opinion.
type Next interface {
	// Authorize reports whether the request is allowed, and why.
	Authorize(ctx context.Context, a auth.Attributes) (allowed bool, reason string, err error)
}

// Decision is the node authorizer's verdict.
type Decision int

const (
	// NoOpinion leaves the request to the next authorizer.
	NoOpinion Decision = iota
	Allow
	// Deny is final: the next authorizer is not asked (RBAC grants the
	// system:nodes group the whole system:node role, which this narrows).
	Deny
)

// Authorizer is the node authorizer in front of Next.
type Authorizer struct {
	graph Graph
	next  Next
}

// New returns the node authorizer in front of next.
func New(g Graph, next Next) *Authorizer { return &Authorizer{graph: g, next: next} }

// Authorize implements the API server's Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, attrs auth.Attributes) (bool, string, error) {
	d, reason, err := a.Decide(ctx, attrs)
	switch {
	case err != nil:
		return false, reason, err
	case d == Allow:
		return true, reason, nil
	case d == Deny:
		return false, reason, nil
	}
	return a.next.Authorize(ctx, attrs)
}

// NodeName returns the node a user is, if it is one.
func NodeName(u *auth.User) (string, bool) {
	if u == nil || !u.InGroup(auth.GroupNodes) {
		return "", false
	}
	name, ok := strings.CutPrefix(u.Name, "system:node:")
	return name, ok && name != ""
}

// Decide returns the node authorizer's own verdict.
func (a *Authorizer) Decide(ctx context.Context, attrs auth.Attributes) (Decision, string, error) {
	node, ok := NodeName(attrs.User)
	if !ok || !attrs.ResourceRequest {
		return NoOpinion, "", nil
	}
	r := request{a: a, attrs: attrs, node: node, consulted: new(bool)}
	d, reason, err := r.decide(ctx)
	if d == Deny && err == nil && *r.consulted {
		// The watch cache may lag a write that bound a pod a moment ago:
		// wait for it once before refusing.
		if err := a.graph.Sync(ctx); err != nil {
			return Deny, reason, err
		}
		d, reason, err = r.decide(ctx)
	}
	return d, reason, err
}

type request struct {
	a     *Authorizer
	attrs auth.Attributes
	node  string
	// consulted is set when the decision read the pod graph.
	consulted *bool
}

func (r request) verbIs(verbs ...string) bool {
	for _, v := range verbs {
		if r.attrs.Verb == v {
			return true
		}
	}
	return false
}

func (r request) deny(format string, args ...any) (Decision, string, error) {
	return Deny, fmt.Sprintf("node %q ", r.node) + fmt.Sprintf(format, args...), nil
}

func allow(reason string) (Decision, string, error) { return Allow, "node authorizer: " + reason, nil }

// decide applies the rules by group and resource.
func (r request) decide(ctx context.Context) (Decision, string, error) {
	at := r.attrs
	switch at.APIGroup + "/" + at.Resource {
	case "/nodes":
		return r.nodes()
	case "/pods":
		return r.pods(ctx)
	case "/secrets", "/configmaps", "/persistentvolumeclaims":
		return r.referenced(ctx)
	case "/serviceaccounts":
		return r.serviceAccountToken(ctx)
	case "coordination.k8s.io/leases":
		return r.lease()
	case "/services", "/endpoints", "discovery.k8s.io/endpointslices":
		if at.Subresource == "" && r.verbIs("get", "list", "watch") {
			return allow("nodes read services and endpoints")
		}
	case "/events", "events.k8s.io/events":
		if r.verbIs("create", "update", "patch") {
			return allow("nodes report events")
		}
	case "certificates.k8s.io/certificatesigningrequests":
		if at.Subresource == "" && r.verbIs("create", "get", "list", "watch") {
			return allow("nodes request certificates")
		}
	case "certificates.k8s.io/podcertificaterequests":
		// Which pods a node may ask for is checked on the body at
		// admission (admission.Certificates); signing is for signers.
		if at.Subresource == "" && r.verbIs("create", "get", "list", "watch") {
			return allow("nodes request their pods' certificates")
		}
		return r.deny("may not %s podcertificaterequests %s", at.Verb, at.Subresource)
	case "authentication.k8s.io/tokenreviews", "authorization.k8s.io/subjectaccessreviews":
		if r.verbIs("create") {
			return allow("nodes delegate authentication and authorization")
		}
	}
	return NoOpinion, "", nil
}

func (r request) nodes() (Decision, string, error) {
	at := r.attrs
	switch {
	case at.Subresource == "" && r.verbIs("get", "list", "watch"):
		return allow("nodes read nodes")
	case at.Subresource == "" && r.verbIs("create") && (at.Name == "" || at.Name == r.node):
		// The name is in the body: NodeRestriction admission checks it.
		return allow("a node registers itself")
	case (at.Subresource == "" || at.Subresource == "status") && r.verbIs("get", "update", "patch", "delete") && at.Name == r.node:
		return allow("a node writes its own Node")
	case at.Subresource == "" || at.Subresource == "status":
		return r.deny("may only write its own Node object, not %q", at.Name)
	}
	return NoOpinion, "", nil
}

func (r request) lease() (Decision, string, error) {
	at := r.attrs
	if at.Namespace == corev1.NamespaceNodeLease && at.Subresource == "" {
		if r.verbIs("create") && (at.Name == "" || at.Name == r.node) {
			return allow("a node creates its own Lease")
		}
		if r.verbIs("get", "update", "patch", "delete") && at.Name == r.node {
			return allow("a node renews its own Lease")
		}
	}
	return r.deny("may only use its own Lease %s/%s", corev1.NamespaceNodeLease, r.node)
}

func (r request) pods(ctx context.Context) (Decision, string, error) {
	at := r.attrs
	switch {
	case at.Subresource == "" && r.verbIs("get", "list", "watch"):
		return allow("nodes read pods")
	case at.Subresource == "" && r.verbIs("create"):
		// Only mirror pods bound to the node: NodeRestriction checks the body.
		return allow("a node creates mirror pods")
	case at.Subresource == "" && r.verbIs("delete"),
		at.Subresource == "status" && r.verbIs("get", "update", "patch"),
		at.Subresource == "eviction" && r.verbIs("create"):
		*r.consulted = true
		pod, err := r.a.graph.Pod(ctx, at.Namespace, at.Name)
		if err != nil {
			return Deny, "", err
		}
		if pod != nil && pod.Spec.NodeName == r.node {
			return allow("the pod is bound to the node")
		}
		return r.deny("may only %s pods bound to it; %s/%s is not", at.Verb, at.Namespace, at.Name)
	case at.Subresource == "" || at.Subresource == "status" || at.Subresource == "eviction":
		return r.deny("may not %s pods", at.Verb)
	}
	return NoOpinion, "", nil
}

// referenced allows reading a Secret, ConfigMap or PersistentVolumeClaim
// that a pod bound to the node uses.
func (r request) referenced(ctx context.Context) (Decision, string, error) {
	at := r.attrs
	kind := kindOf(at.Resource)
	readOnly := at.Subresource == "" && r.verbIs("get", "list", "watch")
	pvcStatus := kind == RefPVC && at.Subresource == "status" && r.verbIs("get", "update", "patch")
	if (!readOnly && !pvcStatus) || at.Name == "" {
		return r.deny("may only read %s that its pods use, one by name", at.Resource)
	}
	*r.consulted = true
	pods, err := r.a.graph.PodsOnNode(ctx, r.node)
	if err != nil {
		return Deny, "", err
	}
	for _, p := range pods {
		if p.Namespace == at.Namespace && podReferences(p, kind, at.Name) {
			return allow(fmt.Sprintf("pod %s/%s on the node uses %s %q", p.Namespace, p.Name, kind, at.Name))
		}
	}
	return r.deny("has no pod that uses %s %s/%s", kind, at.Namespace, at.Name)
}

// serviceAccountToken allows TokenRequests for, and reads of, the service
// accounts of the node's pods.
func (r request) serviceAccountToken(ctx context.Context) (Decision, string, error) {
	at := r.attrs
	// get: a pod certificate request names the service account's UID.
	if !(at.Subresource == "token" && r.verbIs("create")) && !(at.Subresource == "" && r.verbIs("get")) {
		return r.deny("may not %s serviceaccounts", at.Verb)
	}
	*r.consulted = true
	pods, err := r.a.graph.PodsOnNode(ctx, r.node)
	if err != nil {
		return Deny, "", err
	}
	for _, p := range pods {
		if p.Namespace == at.Namespace && serviceAccountOf(p) == at.Name {
			return allow(fmt.Sprintf("pod %s/%s on the node runs as service account %q", p.Namespace, p.Name, at.Name))
		}
	}
	return r.deny("has no pod running as service account %s/%s", at.Namespace, at.Name)
}

func serviceAccountOf(p *corev1.Pod) string {
	if p.Spec.ServiceAccountName != "" {
		return p.Spec.ServiceAccountName
	}
	return p.Spec.DeprecatedServiceAccount
}
