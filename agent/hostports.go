package agent

import (
	"context"
	"net"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"skiff/agent/kubelet"
	"skiff/netproxy"
	"skiff/runtime/podnet"
)

// hostPorts tells the proxy the host ports of this node's pods, as the
// CNI portmap plugin learns them at sandbox setup: the pod specs come from
// an informer on the node's pods, their addresses from the pod network as
// the kubelet sets each pod up. It wraps the kubelet's Network, so a
// pod's ports are queued for mapping before any of its containers starts,
// hence before it can be Ready; a pod's status address (after an agent
// restart, when the kubelet adopts running pods) is the fallback.
type hostPorts struct {
	kubelet.Network
	factory informers.SharedInformerFactory
	pods    cache.Indexer
	// changed tells the proxy to read HostPorts again.
	changed func()

	mu sync.Mutex
	// ips are the pod addresses by UID; nil once the pod's network is torn
	// down (its status may still show the address for a while).
	ips map[string]net.IP
}

func newHostPorts(client kubernetes.Interface, nodeName string, network kubelet.Network) (*hostPorts, error) {
	h := &hostPorts{
		Network: network,
		factory: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "spec.nodeName=" + nodeName
		})),
		changed: func() {},
		ips:     map[string]net.IP{},
	}
	inf := h.factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.podChanged,
		UpdateFunc: func(old, cur any) { h.podChanged(old); h.podChanged(cur) },
		DeleteFunc: h.podDeleted,
	}); err != nil {
		return nil, err
	}
	h.pods = inf.GetIndexer()
	return h, nil
}

// run runs the pod informer until ctx ends.
func (h *hostPorts) run(ctx context.Context) error {
	h.factory.Start(ctx.Done())
	<-ctx.Done()
	h.factory.Shutdown()
	return nil
}

// SetupPod records the address the pod network gave the pod.
func (h *hostPorts) SetupPod(ctx context.Context, req podnet.PodRequest) (podnet.PodNetwork, error) {
	pn, err := h.Network.SetupPod(ctx, req)
	if err == nil && pn.IP != nil {
		h.mu.Lock()
		h.ips[req.UID] = pn.IP
		h.mu.Unlock()
		h.changed()
	}
	return pn, err
}

// TeardownPod unmaps the pod's ports with its network.
func (h *hostPorts) TeardownPod(ctx context.Context, uid string) error {
	err := h.Network.TeardownPod(ctx, uid)
	h.mu.Lock()
	_, known := h.ips[uid]
	h.ips[uid] = nil
	h.mu.Unlock()
	if known {
		h.changed()
	}
	return err
}

// HostPorts lists the host ports of the node's pods that have an
// address and are not done.
func (h *hostPorts) HostPorts() []netproxy.HostPort {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []netproxy.HostPort
	for _, obj := range h.pods.List() {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !hasHostPorts(pod) || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		var ips []net.IP
		if ip, known := h.ips[string(pod.UID)]; known {
			if ip == nil {
				continue // torn down
			}
			ips = []net.IP{ip}
		} else {
			for _, s := range pod.Status.PodIPs {
				if ip := net.ParseIP(s.IP); ip != nil {
					ips = append(ips, ip)
				}
			}
		}
		out = append(out, netproxy.PodHostPorts(pod, ips)...)
	}
	return out
}

func (h *hostPorts) podChanged(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && hasHostPorts(pod) {
		h.changed()
	}
}

func (h *hostPorts) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	h.mu.Lock()
	delete(h.ips, string(pod.UID))
	h.mu.Unlock()
	if hasHostPorts(pod) {
		h.changed()
	}
}

// hasHostPorts says whether pod publishes a port on the node through NAT.
func hasHostPorts(pod *corev1.Pod) bool {
	if pod.Spec.HostNetwork {
		return false
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort > 0 {
					return true
				}
			}
		}
	}
	return false
}

// podNetwork is the pod network as the kubelet gets it: through the host
// port tracker when the proxy runs.
func (n *node) podNetwork() kubelet.Network {
	if n.services != nil && n.services.hostPorts != nil {
		return n.services.hostPorts
	}
	return n.network
}
