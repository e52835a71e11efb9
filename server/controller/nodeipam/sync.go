package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sync brings one node's record in line with the node: a deleted node's
// subnets are freed, a node with pod CIDRs keeps them, a node without
// gets new ones.
func (c *controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.setWaiting(name, false)
		if c.alloc.release(name) {
			c.log.Info("released pod CIDRs of deleted node", "node", name)
			c.wake()
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	// A node deleted and registered again under the same name is a new
	// node: what the old one held is free.
	if c.alloc.releaseIfNot(name, node.UID) {
		c.wake()
	}
	if hasCIDRs(node) {
		c.setWaiting(name, false)
		c.occupy(node)
		return nil
	}
	// What was handed to this node before is handed again, so a retry
	// after a failed write (or an update seen before our write reached
	// the cache) does not take a second subnet.
	want, ok := c.alloc.held(name, node.UID)
	if !ok || len(want) == 0 {
		want, err = c.alloc.allocate(name, node.UID)
		if errors.Is(err, errFull) {
			c.setWaiting(name, true)
			c.recorder.Eventf(node, corev1.EventTypeNormal, ReasonCIDRNotAvailable, "Node %s status is now: %s", name, ReasonCIDRNotAvailable)
			return fmt.Errorf("allocate pod CIDR for node %s: %w", name, err)
		}
		if err != nil {
			return fmt.Errorf("allocate pod CIDR for node %s: %w", name, err)
		}
	}
	c.setWaiting(name, false)
	return c.assign(ctx, node, want)
}

// assign writes the pod CIDRs into the node with a patch, so nothing else
// of a possibly stale cached node is written back. The UID in the patch
// makes it fail rather than land on a newer node of the same name.
func (c *controller) assign(ctx context.Context, node *corev1.Node, cidrs []*net.IPNet) error {
	strs := cidrStrings(cidrs)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": node.UID},
		"spec":     map[string]any{"podCIDR": strs[0], "podCIDRs": strs},
	})
	if err != nil {
		return fmt.Errorf("encode pod CIDR patch: %w", err)
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		c.log.Info("assigned pod CIDRs", "node", node.Name, "podCIDRs", strs)
		c.recorder.Eventf(node, corev1.EventTypeNormal, ReasonCIDRAssigned, "Assigned pod CIDRs %s", strings.Join(strs, ","))
		return nil
	case apierrors.IsNotFound(err):
		if c.alloc.release(node.Name) {
			c.wake()
		}
		return nil
	case apierrors.IsConflict(err) || apierrors.IsInvalid(err):
		// Another incarnation of the node, or pod CIDRs someone else set
		// meanwhile: let go, and look again at what the node now has.
		if c.alloc.release(node.Name) {
			c.wake()
		}
	}
	c.recorder.Eventf(node, corev1.EventTypeNormal, ReasonCIDRAssignmentFailed, "Node %s status is now: %s", node.Name, ReasonCIDRAssignmentFailed)
	return fmt.Errorf("set pod CIDRs %v on node %s: %w", strs, node.Name, err)
}

// occupy records the pod CIDRs a node already has.
func (c *controller) occupy(node *corev1.Node) {
	cidrs := parseCIDRs(node)
	outside, shared := c.alloc.occupy(node.Name, node.UID, cidrs)
	if len(outside) > 0 {
		// The API server keeps pod CIDRs once set: nothing to do but say so.
		c.log.Warn("node pod CIDR outside the cluster CIDR; not tracked", "node", node.Name, "podCIDRs", cidrStrings(outside))
	}
	if shared {
		c.log.Warn("node pod CIDR overlaps another node's", "node", node.Name, "podCIDRs", cidrStrings(cidrs))
	}
}

func hasCIDRs(node *corev1.Node) bool {
	return node.Spec.PodCIDR != "" || len(node.Spec.PodCIDRs) > 0
}

// parseCIDRs reads podCIDRs, or the older single podCIDR alone.
func parseCIDRs(node *corev1.Node) []*net.IPNet {
	strs := node.Spec.PodCIDRs
	if len(strs) == 0 && node.Spec.PodCIDR != "" {
		strs = []string{node.Spec.PodCIDR}
	}
	var out []*net.IPNet
	for _, s := range strs {
		if _, c, err := net.ParseCIDR(s); err == nil {
			out = append(out, c)
		}
	}
	return out
}
