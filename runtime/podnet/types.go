// Package podnet is skiff's built-in pod network: a network namespace per
// pod that the agent owns, a bridge per node, a veth per pod, addresses from
// the node's podCIDR (persisted), and routes to the other nodes' podCIDRs
// over VXLAN or direct routes, with masquerade for traffic leaving the
// cluster. No CNI plugin binaries.
package podnet

import (
	"log/slog"
	"net"
)

// Backend is how pod traffic crosses nodes.
type Backend string

const (
	BackendVXLAN  Backend = "vxlan"
	BackendHostGW Backend = "host-gw"
	// BackendNone leaves pod networking to the user's CNI: pods still get a
	// namespace with loopback, nothing else.
	BackendNone Backend = "none"
)

// Annotations this node publishes on its Node so that peers can reach it.
const (
	AnnotationNodeIP   = "skiff.io/node-ip"
	AnnotationBackend  = "skiff.io/network-backend"
	AnnotationVTEPMAC  = "skiff.io/vxlan-mac"
	AnnotationPodCIDRs = "skiff.io/pod-cidr"
)

// Config is the node's network.
type Config struct {
	NodeName string
	// NodeIP is the address other nodes reach this one at (the VXLAN
	// underlay and the host-gw next hop).
	NodeIP      net.IP
	ClusterCIDR *net.IPNet
	Backend     Backend
	// MTU of pod interfaces; 0 = the underlay's MTU (minus 50 for VXLAN).
	MTU int
	// BridgeName ("skiff0") and VXLANName ("skiff.vxlan"), VNI (1) and
	// VXLANPort (8472).
	BridgeName string
	VXLANName  string
	VNI        int
	VXLANPort  int
	// StateDir holds address allocations (<data-dir>/agent/network).
	StateDir string
	// NetNSDir is where pod namespaces are bind-mounted (/run/skiff/netns).
	NetNSDir string
	// NetNS is the path of the node's own network namespace, in which the
	// bridge, VXLAN device, routes and nftables live. "" means
	// /proc/self/ns/net: the namespace of the process (the host in
	// production). Tests point it at a namespace they created.
	NetNS  string
	Logger *slog.Logger
}

// Peer is another node of the cluster.
type Peer struct {
	Name        string
	InternalIP  net.IP
	PodCIDR     *net.IPNet
	Annotations map[string]string
}

// PodRequest names the pod whose network is being set up.
type PodRequest struct {
	UID       string
	Namespace string
	Name      string
}

// PodNetwork is a pod's namespace and address.
type PodNetwork struct {
	UID       string
	NetNSPath string
	IP        net.IP
}
