package nodestatus

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// WaitForPodCIDR waits until the Node has spec.podCIDR (the node IPAM
// controller assigns it after registration) and returns it parsed. It
// watches the Node and re-reads it every couple of seconds in case a watch
// event was missed.
func (r *Reporter) WaitForPodCIDR(ctx context.Context) (*net.IPNet, error) {
	nodes := r.cfg.Client.CoreV1().Nodes()
	for {
		node, err := nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
		if err == nil {
			if cidr, err := podCIDR(node); cidr != nil || err != nil {
				return cidr, err
			}
		} else if ctx.Err() == nil {
			r.cfg.Logger.Warn("wait for podCIDR: get node", "node", r.cfg.NodeName, "err", err)
		}
		cidr, err := r.watchPodCIDR(ctx, node)
		if cidr != nil || err != nil {
			return cidr, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait for node %s podCIDR: %w", r.cfg.NodeName, ctx.Err())
		}
	}
}

// watchPodCIDR watches the Node for up to podCIDRRecheck and returns
// the podCIDR if an event carries one, else nil, nil.
func (r *Reporter) watchPodCIDR(ctx context.Context, seen *corev1.Node) (*net.IPNet, error) {
	wctx, cancel := context.WithTimeout(ctx, podCIDRRecheck)
	defer cancel()
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", r.cfg.NodeName).String()}
	if seen != nil {
		opts.ResourceVersion = seen.ResourceVersion
	}
	w, err := r.cfg.Client.CoreV1().Nodes().Watch(wctx, opts)
	if err != nil {
		<-wctx.Done()
		return nil, nil
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			return nil, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode || node.Name != r.cfg.NodeName || ev.Type == watch.Deleted {
				continue
			}
			if cidr, err := podCIDR(node); cidr != nil || err != nil {
				return cidr, err
			}
		}
	}
}

func podCIDR(node *corev1.Node) (*net.IPNet, error) {
	if node.Spec.PodCIDR == "" {
		return nil, nil
	}
	_, cidr, err := net.ParseCIDR(node.Spec.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("node %s spec.podCIDR %q: %w", node.Name, node.Spec.PodCIDR, err)
	}
	return cidr, nil
}

// WatchPeers calls onChange with every other Node (sorted by name) once the
// node cache has synced and again whenever a peer appears, goes, or changes
// in a way the pod network cares about (spec, labels, annotations,
// addresses, Ready status, deletion). Calls are never concurrent and
// heartbeat-only status updates do not cause them. It returns nil when ctx
// ends.
func (r *Reporter) WatchPeers(ctx context.Context, onChange func([]corev1.Node)) error {
	factory := informers.NewSharedInformerFactory(r.cfg.Client, 0)
	inf := factory.Core().V1().Nodes()
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() },
		UpdateFunc: func(o, n any) {
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if !ok1 || !ok2 || peerChanged(on, nn) {
				poke()
			}
		},
		DeleteFunc: func(any) { poke() },
	})
	if err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	lister := inf.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil
	}
	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		all, err := lister.List(labels.Everything())
		if err != nil {
			r.cfg.Logger.Warn("list peer nodes", "err", err)
			continue
		}
		peers := make([]corev1.Node, 0, len(all))
		for _, n := range all {
			if n.Name != r.cfg.NodeName {
				peers = append(peers, *n.DeepCopy())
			}
		}
		slices.SortFunc(peers, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
		onChange(peers)
	}
}

// peerChanged reports whether an update matters to the pod network.
func peerChanged(o, n *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(o.Spec, n.Spec) ||
		!maps.Equal(o.Labels, n.Labels) ||
		!maps.Equal(o.Annotations, n.Annotations) ||
		!equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) ||
		readyStatus(o) != readyStatus(n) ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
