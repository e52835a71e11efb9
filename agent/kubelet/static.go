package kubelet

import (
	"context"
	"crypto/md5" //nolint:gosec // a content hash for a UID, as upstream
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Annotations of static and mirror pods, as upstream.
const (
	annotationMirror = "kubernetes.io/config.mirror"
	annotationHash   = "kubernetes.io/config.hash"
	annotationSource = "kubernetes.io/config.source"
	annotationSeen   = "kubernetes.io/config.seen"
)

// readStaticPods parses every manifest of the static pod folder.
func (k *Kubelet) readStaticPods() map[types.UID]*corev1.Pod {
	out := map[types.UID]*corev1.Pod{}
	if k.cfg.StaticPodDir == "" {
		return out
	}
	entries, err := os.ReadDir(k.cfg.StaticPodDir)
	if err != nil {
		if !os.IsNotExist(err) {
			k.log.Warn("read static pod folder", "dir", k.cfg.StaticPodDir, "err", err)
		}
		return out
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		path := filepath.Join(k.cfg.StaticPodDir, name)
		pod, err := k.parseStaticPod(path)
		if err != nil {
			k.log.Warn("static pod manifest", "file", path, "err", err)
			continue
		}
		out[pod.UID] = pod
	}
	return out
}

// parseStaticPod reads one manifest and applies upstream's defaults: the
// UID is a hash of the pod, the node and the file; the name gets the node's
// name as suffix.
func (k *Kubelet) parseStaticPod(path string) (*corev1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		if err2 := yaml.Unmarshal(data, pod); err2 != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err2)
		}
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("%s: kind %q is not Pod", path, pod.Kind)
	}
	if pod.Name == "" || len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s: a pod needs a name and containers", path)
	}
	canon, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	h := md5.New() //nolint:gosec
	h.Write(canon)
	fmt.Fprintf(h, "host:%s", k.cfg.NodeName)
	fmt.Fprintf(h, "file:%s", path)
	uid := types.UID(hex.EncodeToString(h.Sum(nil)))

	pod.UID = uid
	pod.Name = pod.Name + "-" + strings.ToLower(k.cfg.NodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = k.cfg.NodeName
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if pod.Spec.DNSPolicy == "" {
		pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[annotationHash] = string(uid)
	pod.Annotations[annotationSource] = "file"
	pod.Annotations[annotationSeen] = k.now().UTC().Format("2006-01-02T15:04:05.999999999Z07:00")
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return pod, nil
}

// loadStatic reads the static pods once, before adoption.
func (k *Kubelet) loadStatic() {
	pods := k.readStaticPods()
	k.mu.Lock()
	k.static = pods
	k.mu.Unlock()
}

func (k *Kubelet) kickStatic() {
	select {
	case k.staticCh <- struct{}{}:
	default:
	}
}

// staticLoop re-reads the manifests every StaticPodInterval and keeps the
// mirror pods in the API.
func (k *Kubelet) staticLoop(ctx context.Context) {
	t := k.clock.NewTicker(k.cfg.StaticPodInterval)
	defer t.Stop()
	k.syncStatic(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-k.staticCh:
		}
		k.syncStatic(ctx)
	}
}

// syncStatic starts workers of new static pods, removes those whose
// manifest is gone, and creates, replaces or re-creates mirror pods.
func (k *Kubelet) syncStatic(ctx context.Context) {
	if k.cfg.StaticPodDir == "" {
		return
	}
	pods := k.readStaticPods()
	k.mu.Lock()
	old := k.static
	k.static = pods
	k.mu.Unlock()
	for uid, pod := range old {
		if _, ok := pods[uid]; !ok {
			k.mu.Lock()
			w := k.workers[uid]
			k.mu.Unlock()
			if w != nil {
				w.markRemoved(pod)
			}
		}
	}
	uids := make([]string, 0, len(pods))
	for uid := range pods {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	for _, uid := range uids {
		pod := pods[types.UID(uid)]
		if _, ok := old[pod.UID]; ok {
			pod = old[pod.UID]
			k.mu.Lock()
			k.static[pod.UID] = pod
			k.mu.Unlock()
		}
		k.ensureWorker(pod, true, nil)
		k.ensureMirror(ctx, pod)
	}
}

// ensureMirror makes the pod's mirror in the API match it.
func (k *Kubelet) ensureMirror(ctx context.Context, pod *corev1.Pod) {
	pods := k.cfg.Client.CoreV1().Pods(pod.Namespace)
	cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		if cur.Annotations[annotationMirror] == string(pod.UID) && cur.DeletionTimestamp == nil {
			return
		}
		if !isMirror(cur) {
			k.log.Warn("a non-mirror pod has the static pod's name", "pod", podKey(pod))
			return
		}
		k.deleteMirror(ctx, pod.Namespace, pod.Name, cur.UID)
		return // re-created on the next round
	case !apierrors.IsNotFound(err):
		k.log.Warn("read mirror pod", "pod", podKey(pod), "err", err)
		return
	}
	node, err := k.cfg.Client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		k.log.Debug("node not readable yet; mirror pod waits", "pod", podKey(pod), "err", err)
		return
	}
	mirror := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace,
			Labels:      pod.Labels,
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: *pod.Spec.DeepCopy(),
	}
	for a, v := range pod.Annotations {
		mirror.Annotations[a] = v
	}
	mirror.Annotations[annotationMirror] = string(pod.UID)
	if _, err := pods.Create(ctx, mirror, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		k.log.Warn("create mirror pod", "pod", podKey(pod), "err", err)
		return
	}
	// Let the worker write status to the new mirror.
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w != nil {
		w.setField(func() { w.lastStatus = nil })
		w.kick()
	}
}

// deleteMirror removes a mirror pod at once (uid "" = whatever is there).
func (k *Kubelet) deleteMirror(ctx context.Context, ns, name string, uid types.UID) {
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	} else {
		cur, err := k.cfg.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || !isMirror(cur) {
			return
		}
		u := cur.UID
		opts.Preconditions = &metav1.Preconditions{UID: &u}
	}
	if err := k.cfg.Client.CoreV1().Pods(ns).Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		k.log.Warn("delete mirror pod", "pod", ns+"/"+name, "err", err)
	}
}
