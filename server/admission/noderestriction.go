package admission

import (
	"context"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/apiserver"
	"skiff/server/auth/node"
)

// nodeRestrictionLabelPrefix marks labels only administrators may set on
// nodes (upstream's node-restriction.kubernetes.io/).
const nodeRestrictionLabelPrefix = "node-restriction.kubernetes.io/"

// NodeRestriction limits what kubelets (system:node:<name> in
// system:nodes) may write, as upstream's plugin does: only their own Node
// (without node-restriction.kubernetes.io/ labels, and without changing
// its taints once registered) and Lease; only mirror pods bound to
// themselves that use no Secret, ConfigMap, claim or service account; and
// status updates, deletions and evictions only of pods bound to them. Run
// it before the ServiceAccount plugin, which gives pods a service account.
type NodeRestriction struct{}

// Admit implements apiserver.Admitter.
func (NodeRestriction) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	me, ok := node.NodeName(a.User)
	if !ok || a.Resource == nil || a.Op == apiserver.OpConnect {
		return nil // upstream's NodeRestriction does not handle CONNECT
	}
	var err error
	switch a.Resource.Group + "/" + a.Resource.Name {
	case "/nodes":
		err = admitNode(me, a)
	case "/pods":
		err = admitPod(me, a)
	case "coordination.k8s.io/leases":
		err = admitLease(me, a)
	default:
		return nil
	}
	if err != nil {
		return apierrors.NewForbidden(a.Resource.GVR().GroupResource(), objectName(a), err)
	}
	return nil
}

func objectName(a apiserver.AdmissionAttributes) string {
	if a.Object != nil {
		return nameOf(a.Object)
	}
	if a.Old != nil {
		return nameOf(a.Old)
	}
	return ""
}

func admitNode(me string, a apiserver.AdmissionAttributes) error {
	name := objectName(a)
	if name != me {
		return fmt.Errorf("node %q may not modify node %q", me, name)
	}
	n, _ := a.Object.(*corev1.Node)
	old, _ := a.Old.(*corev1.Node)
	if n == nil {
		return nil // delete of its own Node
	}
	var oldLabels map[string]string
	if old != nil {
		oldLabels = old.Labels
	}
	if keys := restrictedLabelChanges(oldLabels, n.Labels); len(keys) > 0 {
		return fmt.Errorf("node %q may not set or change label %q (the %s prefix is for administrators)", me, keys[0], nodeRestrictionLabelPrefix)
	}
	if a.Op == apiserver.OpUpdate && old != nil && !equality.Semantic.DeepEqual(old.Spec.Taints, n.Spec.Taints) {
		return fmt.Errorf("node %q may not modify its taints", me)
	}
	return nil
}

// restrictedLabelChanges lists the node-restriction labels that differ.
func restrictedLabelChanges(old, cur map[string]string) []string {
	var out []string
	for k, v := range cur {
		if strings.HasPrefix(k, nodeRestrictionLabelPrefix) {
			if ov, ok := old[k]; !ok || ov != v {
				out = append(out, k)
			}
		}
	}
	for k := range old {
		if _, ok := cur[k]; !ok && strings.HasPrefix(k, nodeRestrictionLabelPrefix) {
			out = append(out, k)
		}
	}
	return out
}

func admitPod(me string, a apiserver.AdmissionAttributes) error {
	switch {
	case a.Op == apiserver.OpCreate && a.Subresource == "":
		pod, ok := a.Object.(*corev1.Pod)
		if !ok {
			return nil
		}
		return admitMirrorPod(me, pod)
	case a.Op == apiserver.OpUpdate && a.Subresource == "status",
		a.Op == apiserver.OpDelete:
		old, ok := a.Old.(*corev1.Pod)
		if ok && old.Spec.NodeName != me {
			return fmt.Errorf("node %q may only change pods bound to it; %s/%s is bound to %q", me, old.Namespace, old.Name, old.Spec.NodeName)
		}
		return nil
	case a.Op == apiserver.OpCreate && a.Subresource == "eviction":
		return nil // checked as the delete it becomes
	}
	return fmt.Errorf("node %q may not %s pods", me, strings.ToLower(string(a.Op)))
}

func admitMirrorPod(me string, pod *corev1.Pod) error {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
		return fmt.Errorf("node %q may only create mirror pods (annotation %s)", me, corev1.MirrorPodAnnotationKey)
	}
	if pod.Spec.NodeName != me {
		return fmt.Errorf("node %q may only create mirror pods bound to itself, not to %q", me, pod.Spec.NodeName)
	}
	if pod.Spec.ServiceAccountName != "" {
		return fmt.Errorf("node %q may not create a mirror pod that uses service account %q", me, pod.Spec.ServiceAccountName)
	}
	var refErr error
	node.VisitReferences(pod, func(kind node.RefKind, name string) {
		if refErr == nil {
			refErr = fmt.Errorf("node %q may not create a mirror pod that uses %s %q", me, kind, name)
		}
	})
	if refErr != nil {
		return refErr
	}
	for _, ref := range pod.OwnerReferences {
		if ref.APIVersion != "v1" || ref.Kind != "Node" || ref.Name != me {
			return fmt.Errorf("node %q may only own its mirror pods by its own Node, not %s %q", me, ref.Kind, ref.Name)
		}
	}
	return nil
}

func admitLease(me string, a apiserver.AdmissionAttributes) error {
	if a.Op == apiserver.OpDelete {
		old, _ := a.Old.(*coordinationv1.Lease)
		if old != nil && (old.Namespace != corev1.NamespaceNodeLease || old.Name != me) {
			return fmt.Errorf("node %q may only delete its own Lease", me)
		}
		return nil
	}
	l, ok := a.Object.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	if l.Namespace != corev1.NamespaceNodeLease || l.Name != me {
		return fmt.Errorf("node %q may only write its own Lease %s/%s, not %s/%s", me, corev1.NamespaceNodeLease, me, l.Namespace, l.Name)
	}
	return nil
}
