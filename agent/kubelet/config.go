// Package kubelet does the kubelet's pod duties on one node: it watches the
// node's pods (and static pods from a manifests folder), runs their
// containers through the runtime with init containers, restart policies,
// back-off, probes and graceful termination, and reports pod status and
// events to the API server.
package kubelet

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"skiff/agent/podenv"
	"skiff/agent/qos"
	"skiff/runtime/containers"
	"skiff/runtime/images"
	"skiff/runtime/podnet"
)

// Runtime runs containers (runtime/containers.Runtime satisfies it).
type Runtime interface {
	// Create makes a container (not started) and returns its ID.
	Create(ctx context.Context, cfg containers.ContainerConfig) (string, error)
	// Start starts a created container's task.
	Start(ctx context.Context, id string) error
	// Stop sends the stop signal, SIGKILL after grace, and returns once the
	// container exited; no-op when it is not running.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove deletes the container; idempotent.
	Remove(ctx context.Context, id string) error
	// Status reports one container; containers.ErrNotFound (wrapped) when
	// unknown.
	Status(ctx context.Context, id string) (containers.ContainerStatus, error)
	// List reports every container of skiff.
	List(ctx context.Context) ([]containers.ContainerStatus, error)
	// Events streams the IDs of containers whose task exited; the channel
	// closes when ctx ends.
	Events(ctx context.Context) <-chan string
	// UpdateResources changes a running container's cgroup limits (an
	// in-place resize).
	UpdateResources(ctx context.Context, id string, r containers.Resources) error
	// Exec runs a command in a running container and returns its exit code.
	Exec(ctx context.Context, id string, req containers.ExecRequest) (int, error)
}

// Network gives pods their network namespace and address
// (runtime/podnet.Network satisfies it).
type Network interface {
	// SetupPod makes the pod's namespace and address; idempotent per UID.
	SetupPod(ctx context.Context, req podnet.PodRequest) (podnet.PodNetwork, error)
	// TeardownPod removes them; idempotent.
	TeardownPod(ctx context.Context, uid string) error
	// Pods lists the persisted allocations (for orphan cleanup).
	Pods() ([]podnet.PodNetwork, error)
}

// Images makes images present (runtime/images.Store satisfies it).
type Images interface {
	// Ensure pulls ref per policy (images.ErrNotPresent for Never when
	// absent) and returns the local image.
	Ensure(ctx context.Context, ref string, policy corev1.PullPolicy, creds []images.Credential) (images.Image, error)
}

// DNSConfig is what a pod's resolv.conf is made from (agent/volumes'
// DNSConfig, field for field).
type DNSConfig struct {
	ClusterDNS     []string
	ClusterDomain  string
	HostResolvConf string
}

// Volumes makes a pod's volumes and files on disk. The agent adapts
// agent/volumes.Manager to it (volume name → host path maps and DNSConfig
// converted field for field).
type Volumes interface {
	// Setup makes (or refreshes) every volume of the pod and returns volume
	// name → host path.
	Setup(ctx context.Context, pod *corev1.Pod) (map[string]string, error)
	// Mounts are the bind mounts of one container: its volumeMounts and the
	// per-pod hosts, hostname and resolv.conf files.
	Mounts(pod *corev1.Pod, c *corev1.Container, vols map[string]string) ([]containers.Mount, error)
	// WritePodFiles writes the pod's hosts, hostname and resolv.conf.
	WritePodFiles(pod *corev1.Pod, podIP string, dns DNSConfig) error
	// Teardown removes the pod's volumes from disk.
	Teardown(ctx context.Context, podUID string) error
	// PodUIDsOnDisk lists the pods that have volume directories.
	PodUIDsOnDisk() ([]string, error)
}

// EnvMounter is optional on Volumes: when present it is used instead of
// Mounts, so that subPathExpr expands with the container's environment
// (agent/volumes.Manager.MountsWithEnv).
type EnvMounter interface {
	MountsWithEnv(pod *corev1.Pod, c *corev1.Container, vols map[string]string, env []string) ([]containers.Mount, error)
}

// EnvFunc resolves a container's environment (agent/podenv.Resolve bound
// to a getter).
type EnvFunc func(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([]string, error)

// QoS computes a pod's class and cgroup settings (agent/qos).
type QoS struct {
	Class              func(pod *corev1.Pod) corev1.PodQOSClass
	CgroupParent       func(root string, pod *corev1.Pod) string
	ContainerResources func(pod *corev1.Pod, c *corev1.Container) containers.Resources
	Security           func(pod *corev1.Pod, c *corev1.Container) containers.Security
}

// Config is the kubelet of one node.
type Config struct {
	NodeName string
	// Client is the node's client (system:node:<name>).
	Client  kubernetes.Interface
	Runtime Runtime
	Network Network
	Images  Images
	Volumes Volumes
	// Env resolves container environments; nil uses agent/podenv.Resolve
	// reading ConfigMaps and Secrets through Client.
	Env EnvFunc
	// QoS computes classes and cgroup settings; nil fields use agent/qos.
	QoS QoS
	// RuntimeHandlers are the RuntimeClass handlers this node runs, each
	// with its containerd runtime ("" = the runtime's default); nil means
	// DefaultRuntimeHandlers.
	RuntimeHandlers map[string]string
	// StaticPodDir holds static pod manifests; empty disables static pods.
	StaticPodDir string
	// LogDir is the root of container logs (/var/log/pods).
	LogDir string
	// CgroupRoot is the cgroupfs root of pods (/skiff).
	CgroupRoot string
	// CgroupFS is where the cgroup hierarchies are mounted (/sys/fs/cgroup):
	// the kubelet removes the cgroups of pods that are gone there.
	CgroupFS       string
	ClusterDNS     []string
	ClusterDomain  string
	HostResolvConf string
	// NodeIP is the node's address: hostIP, and podIP of hostNetwork pods.
	NodeIP string
	// Recorder emits events; nil makes one that writes through Client.
	Recorder record.EventRecorder
	// Clock drives back-off, resync and probes (the real clock when nil).
	Clock clock.WithTicker
	// NodeStats feeds eviction (memory.available < 100Mi, nodefs.available
	// < 10%); nil reads /proc/meminfo and statfs(NodeFSPath).
	NodeStats func() (NodeStats, error)
	// NodeFSPath is on the node filesystem (the agent's data dir); LogDir
	// when empty.
	NodeFSPath string
	// PodMemory is a pod's memory usage in bytes; nil reads its cgroup.
	PodMemory func(pod *corev1.Pod) int64
	// DisableEviction turns eviction off.
	DisableEviction bool
	// ResyncInterval (10 s) and StaticPodInterval (20 s).
	ResyncInterval    time.Duration
	StaticPodInterval time.Duration
	Logger            *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return errors.New("kubelet: NodeName is required")
	case c.Client == nil:
		return errors.New("kubelet: Client is required")
	case c.Runtime == nil || c.Network == nil || c.Images == nil || c.Volumes == nil:
		return errors.New("kubelet: Runtime, Network, Images and Volumes are required")
	case c.NodeIP != "" && net.ParseIP(c.NodeIP) == nil:
		return errors.New("kubelet: NodeIP is not an IP address")
	}
	return nil
}

func (c *Config) defaults() {
	if c.LogDir == "" {
		c.LogDir = "/var/log/pods"
	}
	if c.RuntimeHandlers == nil {
		c.RuntimeHandlers = DefaultRuntimeHandlers()
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = "/skiff"
	}
	if c.CgroupFS == "" {
		c.CgroupFS = "/sys/fs/cgroup"
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	if c.HostResolvConf == "" {
		c.HostResolvConf = "/etc/resolv.conf"
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = 10 * time.Second
	}
	if c.StaticPodInterval <= 0 {
		c.StaticPodInterval = 20 * time.Second
	}
	if c.NodeFSPath == "" {
		c.NodeFSPath = c.LogDir
	}
	if c.NodeStats == nil {
		c.NodeStats = defaultNodeStats(c.NodeFSPath)
	}
	if c.PodMemory == nil {
		c.PodMemory = func(pod *corev1.Pod) int64 { return defaultPodMemory(c.QoS.CgroupParent(c.CgroupRoot, pod)) }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Env == nil {
		getter := podenv.ClientGetter{Client: c.Client}
		// The node's allocatable is the default of unset limits.* in the
		// downward API, as upstream.
		opts := podenv.Options{NodeName: c.NodeName}
		c.Env = func(ctx context.Context, pod *corev1.Pod, ct *corev1.Container, podIP, hostIP string) ([]string, error) {
			return podenv.ResolveWithOptions(ctx, getter, pod, ct, podIP, hostIP, opts)
		}
	}
	if c.QoS.Class == nil {
		c.QoS.Class = qos.Class
	}
	if c.QoS.CgroupParent == nil {
		c.QoS.CgroupParent = qos.CgroupParent
	}
	if c.QoS.ContainerResources == nil {
		c.QoS.ContainerResources = qos.ContainerResources
	}
	if c.QoS.Security == nil {
		c.QoS.Security = qos.Security
	}
}
