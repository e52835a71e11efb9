package nodestatus

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Register creates the Node, or brings an existing one up to date (labels
// and annotations merged in; taints are only set at creation), then posts
// its full status. Conflicts with other writers (the node IPAM controller
// sets spec.podCIDR on new nodes) are retried. It returns the Node as last
// written.
func (r *Reporter) Register(ctx context.Context) (*corev1.Node, error) {
	nodes := r.cfg.Client.CoreV1().Nodes()
	created := false
	node, err := nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, r.newNode(ctx), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			node, err = nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
		} else {
			created = err == nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("register node %s: %w", r.cfg.NodeName, err)
	}
	r.setUID(node)
	if !created {
		if node, err = r.syncMeta(ctx, node); err != nil {
			return nil, err
		}
	}
	node, err = r.postStatus(ctx, node)
	if err != nil {
		return nil, err
	}
	r.cfg.Logger.Info("node registered", "node", r.cfg.NodeName, "created", created)
	return node, nil
}

func (r *Reporter) setUID(node *corev1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodeUID = node.UID
}

// newNode is the Node as first created: metadata, taints and status.
func (r *Reporter) newNode(ctx context.Context) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        r.cfg.NodeName,
			Labels:      r.wantLabels(),
			Annotations: r.wantAnnotations(),
		},
	}
	node.Spec.Taints = append([]corev1.Taint(nil), r.cfg.Taints...)
	// The status given at creation is best effort: postStatus follows.
	if st, err := r.status(ctx, nil); err == nil {
		node.Status = st
	}
	return node
}

func (r *Reporter) wantAnnotations() map[string]string {
	if r.cfg.Annotations == nil {
		return nil
	}
	return maps.Clone(r.cfg.Annotations())
}

// syncMeta merges the wanted labels and annotations into the Node; it
// writes only if something differs, retrying on conflict.
func (r *Reporter) syncMeta(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	nodes := r.cfg.Client.CoreV1().Nodes()
	labels, annotations := r.wantLabels(), r.wantAnnotations()
	cur := node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			got, err := nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = got
		}
		if containsAll(cur.Labels, labels) && containsAll(cur.Annotations, annotations) {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Labels = mergeInto(upd.Labels, labels)
		upd.Annotations = mergeInto(upd.Annotations, annotations)
		got, err := nodes.Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			cur = nil
			return err
		}
		cur = got
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update node %s metadata: %w", r.cfg.NodeName, err)
	}
	return cur, nil
}

func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func mergeInto(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

// SyncStatus merges labels and annotations and posts the full status once.
// Run calls it periodically; it is exported for the agent's first post and
// for tests.
func (r *Reporter) SyncStatus(ctx context.Context) error {
	node, err := r.syncMeta(ctx, nil)
	if err != nil {
		return err
	}
	r.setUID(node)
	_, err = r.postStatus(ctx, node)
	return err
}

// postStatus writes the status subresource, starting from node (or a fresh
// Get when it is nil or a conflict happened).
func (r *Reporter) postStatus(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	nodes := r.cfg.Client.CoreV1().Nodes()
	cur := node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			got, err := nodes.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = got
		}
		st, err := r.status(ctx, cur)
		if err != nil {
			return err
		}
		upd := cur.DeepCopy()
		upd.Status = st
		got, err := nodes.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			cur = nil
			return err
		}
		cur = got
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update node %s status: %w", r.cfg.NodeName, err)
	}
	return cur, nil
}

// status is the node status to post; old (may be nil) supplies the
// conditions' previous transition times and any conditions others own.
func (r *Reporter) status(ctx context.Context, old *corev1.Node) (corev1.NodeStatus, error) {
	capacity, err := r.host.capacity(r.cfg.DataDir, r.cfg.Capacity)
	if err != nil {
		return corev1.NodeStatus{}, err
	}
	if old != nil {
		keepExtended(capacity, old.Status.Capacity)
	}
	st := corev1.NodeStatus{
		Capacity:        capacity,
		Allocatable:     allocatable(capacity, r.cfg.Reserved),
		Addresses:       r.addresses(),
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(r.cfg.KubeletPort)}},
		NodeInfo:        r.host.systemInfo(r.cfg.RuntimeVersion, r.cfg.KubeletVersion),
	}
	if old != nil {
		st.Phase = old.Status.Phase
		st.VolumesInUse = old.Status.VolumesInUse
		st.VolumesAttached = old.Status.VolumesAttached
		st.Config = old.Status.Config
	}
	if r.cfg.Images != nil {
		imgs, err := r.cfg.Images(ctx)
		if err != nil {
			if ctx.Err() == nil { // not the end of the start-up wait or of the agent
				r.cfg.Logger.Warn("list images for node status", "err", err)
			}
			if old != nil {
				imgs = old.Status.Images
			}
		}
		st.Images = trimImages(imgs)
	}
	msg := readyMessage(r.cfg.Ready)
	r.mu.Lock()
	r.lastErr, r.readySet = msg, true
	r.mu.Unlock()
	var oldConds []corev1.NodeCondition
	if old != nil {
		oldConds = old.Status.Conditions
	}
	st.Conditions = r.conditions(oldConds, msg)
	return st, nil
}

// keepExtended carries over extended resources (example.com/foo) that
// someone else advertised in the node's capacity, as the kubelet does:
// no device plugin of ours owns them, and dropping them would make the
// pods that request them unschedulable.
func keepExtended(capacity, old corev1.ResourceList) {
	for name, q := range old {
		if _, ok := capacity[name]; !ok && isExtendedResource(name) {
			capacity[name] = q.DeepCopy()
		}
	}
}

// isExtendedResource is upstream's IsExtendedResourceName: a domain-
// qualified name outside kubernetes.io, not a quota "requests." name.
func isExtendedResource(name corev1.ResourceName) bool {
	n := string(name)
	domain, _, qualified := strings.Cut(n, "/")
	if !qualified || domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		return false
	}
	return !strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix)
}

func allocatable(capacity, reserved corev1.ResourceList) corev1.ResourceList {
	out := capacity.DeepCopy()
	for name, q := range reserved {
		c, ok := out[name]
		if !ok {
			continue
		}
		c.Sub(q)
		if c.Sign() < 0 {
			c.Set(0)
		}
		out[name] = c
	}
	return out
}

func (r *Reporter) addresses() []corev1.NodeAddress {
	out := make([]corev1.NodeAddress, 0, len(r.cfg.NodeIPs)+1)
	for _, ip := range r.cfg.NodeIPs {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: r.cfg.NodeName})
}

// trimImages keeps the largest images first, at most 50, with at most five
// names each, as the kubelet reports them.
func trimImages(imgs []corev1.ContainerImage) []corev1.ContainerImage {
	out := make([]corev1.ContainerImage, 0, len(imgs))
	for _, img := range imgs {
		if len(img.Names) == 0 {
			continue
		}
		img.Names = append([]string(nil), img.Names[:min(len(img.Names), maxImageNamesPerImage)]...)
		out = append(out, img)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].SizeBytes > out[j].SizeBytes })
	return out[:min(len(out), maxImagesInNodeStatus)]
}

// conditionSpec is one kubelet-owned condition in its true and false forms.
type conditionSpec struct {
	typ                   corev1.NodeConditionType
	trueReason, trueMsg   string
	falseReason, falseMsg string
}

var pressureConditions = []conditionSpec{
	{corev1.NodeMemoryPressure, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
		"KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
	{corev1.NodeDiskPressure, "KubeletHasDiskPressure", "kubelet has disk pressure",
		"KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
	{corev1.NodePIDPressure, "KubeletHasInsufficientPID", "kubelet has insufficient PID available",
		"KubeletHasSufficientPID", "kubelet has sufficient PID available"},
}

// conditions are MemoryPressure, DiskPressure, PIDPressure and Ready (in the
// kubelet's order) followed by any other conditions old carries. Transition
// times are kept while a condition's status does not change; heartbeat is
// now.
func (r *Reporter) conditions(old []corev1.NodeCondition, notReady string) []corev1.NodeCondition {
	now := metav1.NewTime(r.cfg.now())
	var mem, disk, pid bool
	if r.cfg.Pressure != nil {
		mem, disk, pid = r.cfg.Pressure()
	}
	prev := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range old {
		prev[c.Type] = c
	}
	out := make([]corev1.NodeCondition, 0, len(old)+4)
	mk := func(typ corev1.NodeConditionType, on bool, reason, msg string) {
		status := corev1.ConditionFalse
		if on {
			status = corev1.ConditionTrue
		}
		c := corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		if p, ok := prev[typ]; ok && p.Status == status && !p.LastTransitionTime.IsZero() {
			c.LastTransitionTime = p.LastTransitionTime
		}
		out = append(out, c)
		delete(prev, typ)
	}
	for i, on := range []bool{mem, disk, pid} {
		s := pressureConditions[i]
		if on {
			mk(s.typ, true, s.trueReason, s.trueMsg)
		} else {
			mk(s.typ, false, s.falseReason, s.falseMsg)
		}
	}
	if notReady == "" {
		mk(corev1.NodeReady, true, "KubeletReady", "kubelet is posting ready status")
	} else {
		mk(corev1.NodeReady, false, "KubeletNotReady", notReady)
	}
	for _, c := range old {
		if _, ok := prev[c.Type]; ok {
			out = append(out, c)
		}
	}
	return out
}
