// Package limitrange is upstream's LimitRanger admission plugin: a new pod's
// containers get the namespace's LimitRange defaults for what they do not
// request or limit, and pods (containers, init containers and the pod as a
// whole) and claims that break a LimitRange's min, max or limit/request
// ratio are refused with 403 Forbidden.
package limitrange

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"skiff/server/apiserver"
)

// Annotation records on a pod what the plugin defaulted, as upstream.
const Annotation = "kubernetes.io/limit-ranger"

// Lister reads a namespace's LimitRanges.
type Lister interface {
	// ListLimitRanges returns the namespace's LimitRanges. A cache behind
	// it must not answer "none" for a LimitRange created a moment ago
	// (upstream falls back to a live list when its informer has none):
	// a client creating a LimitRange and then a pod expects the defaults.
	ListLimitRanges(ctx context.Context, namespace string) ([]*corev1.LimitRange, error)
}

// Phase says which of upstream's two admission phases a Plugin runs.
type Phase int

const (
	// Both defaults and then checks, in one call.
	Both Phase = iota
	// Mutate only defaults (upstream's LimitRanger in the mutating chain).
	Mutate
	// Validate only checks (upstream's LimitRanger in the validating
	// chain, after mutating webhooks may have changed the resources).
	Validate
)

// Plugin is the LimitRanger admission plugin.
type Plugin struct {
	LimitRanges Lister
	Phase       Phase
}

// Admit implements apiserver.Admitter. Upstream runs the defaulting in the
// mutating phase and the checks in the validating phase; with Phase Both
// they run in one call, defaults from every LimitRange first, so that the
// checks see the defaulted pod as upstream's do.
func (p Plugin) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if !handles(a) {
		return nil
	}
	if old, err := meta.Accessor(a.Old); a.Old != nil && err == nil && old.GetDeletionTimestamp() != nil {
		// An object on its way out is not held to new limits.
		return nil
	}
	acc, err := meta.Accessor(a.Object)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	gr := a.Resource.GVR().GroupResource()
	items, err := p.LimitRanges.ListLimitRanges(ctx, acc.GetNamespace())
	if err != nil {
		return apierrors.NewForbidden(gr, acc.GetName(), fmt.Errorf(
			"unable to %s %v at this time because there was an error enforcing limit ranges: %w", a.Op, a.Resource.GVR(), err))
	}
	items = append([]*corev1.LimitRange(nil), items...)
	// Upstream's order is the informer's, by name within a namespace; a
	// fixed order keeps the annotation and the first refusal stable.
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })

	if pod, ok := a.Object.(*corev1.Pod); ok && p.Phase != Validate {
		// pods/resize stores only the containers' resources (upstream's
		// resize strategy drops metadata changes), so no annotation there.
		annotate := a.Subresource == ""
		for _, lr := range items {
			defaultPod(pod, lr, annotate)
		}
	}
	if p.Phase == Mutate {
		return nil
	}
	for _, lr := range items {
		var err error
		switch o := a.Object.(type) {
		case *corev1.Pod:
			err = validatePod(lr, o)
		case *corev1.PersistentVolumeClaim:
			err = validateClaim(lr, o)
		}
		if err != nil {
			return apierrors.NewForbidden(gr, acc.GetName(), err)
		}
	}
	return nil
}

// handles is upstream's SupportsAttributes: pods on create and on a resize,
// claims on create and update. Other pod updates cannot change containers'
// resources, so there is nothing to default or check.
func handles(a apiserver.AdmissionAttributes) bool {
	if a.Op != apiserver.OpCreate && a.Op != apiserver.OpUpdate {
		return false
	}
	switch a.Object.(type) {
	case *corev1.Pod:
		if a.Op == apiserver.OpUpdate {
			return a.Subresource == "resize"
		}
		return a.Subresource == ""
	case *corev1.PersistentVolumeClaim:
		return a.Subresource == ""
	}
	return false
}

// defaultPod gives every container and init container (ephemeral ones have
// no resources to default) the Container-type defaults of lr it lacks and,
// when annotate, records what was set. As upstream, each LimitRange that
// sets something replaces the annotation.
func defaultPod(pod *corev1.Pod, lr *corev1.LimitRange, annotate bool) {
	def := containerDefaults(lr)
	var notes []string
	for i := range pod.Spec.Containers {
		notes = append(notes, defaultContainer(&pod.Spec.Containers[i], def, "container")...)
	}
	for i := range pod.Spec.InitContainers {
		notes = append(notes, defaultContainer(&pod.Spec.InitContainers[i], def, "init container")...)
	}
	if len(notes) == 0 || !annotate {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[Annotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
}

// containerDefaults are the limits (default) and requests (defaultRequest)
// of lr's Container items.
func containerDefaults(lr *corev1.LimitRange) corev1.ResourceRequirements {
	def := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for name, q := range item.DefaultRequest {
			def.Requests[name] = q.DeepCopy()
		}
		for name, q := range item.Default {
			def.Limits[name] = q.DeepCopy()
		}
	}
	return def
}

// defaultContainer fills in the container's missing requests and limits and
// says what it set, in upstream's words ("cpu, memory request for container
// app").
func defaultContainer(c *corev1.Container, def corev1.ResourceRequirements, kind string) []string {
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	setLimits := fill(c.Resources.Limits, def.Limits)
	setRequests := fill(c.Resources.Requests, def.Requests)
	var notes []string
	if len(setRequests) > 0 {
		notes = append(notes, fmt.Sprintf("%s request for %s %s", strings.Join(setRequests, ", "), kind, c.Name))
	}
	if len(setLimits) > 0 {
		notes = append(notes, fmt.Sprintf("%s limit for %s %s", strings.Join(setLimits, ", "), kind, c.Name))
	}
	return notes
}

// fill copies into dst what src has and dst lacks, and returns those names
// sorted.
func fill(dst, src corev1.ResourceList) []string {
	var set []string
	for name, q := range src {
		if _, ok := dst[name]; !ok {
			dst[name] = q.DeepCopy()
			set = append(set, string(name))
		}
	}
	sort.Strings(set)
	return set
}

var _ apiserver.Admitter = Plugin{}
