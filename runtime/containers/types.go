// Package containers runs a pod's containers in containerd through the v2
// client: OCI specs from a ContainerConfig, task lifecycle with graceful
// stop, exec and attach, CRI-format logs, and status for the agent.
package containers

import (
	"errors"
	"io"
	"log/slog"
	"time"
)

// ErrNotFound is returned (wrapped) when a container ID is unknown.
var ErrNotFound = errors.New("container not found")

// Config is how the runtime reaches containerd.
type Config struct {
	// Address is containerd's gRPC socket.
	Address string
	// Namespace is the containerd namespace skiff's containers live in.
	Namespace string
	// StateDir holds the runtime's own files (stdio FIFOs) under
	// <data-dir>/agent/containers.
	StateDir string
	// Snapshotter unpacks images ("overlayfs" when empty).
	Snapshotter string
	// RuntimeName is the containerd runtime ("io.containerd.runc.v2").
	RuntimeName string
	// LogMaxSize and LogMaxFiles bound each container's CRI log (10 MiB, 5).
	LogMaxSize  int64
	LogMaxFiles int
	Logger      *slog.Logger
}

// Mount is one bind mount into a container.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// Resources are a container's cgroup settings, already computed from its
// requests and limits.
type Resources struct {
	// CPUShares is cpu.shares (from the CPU request; 2 when none).
	CPUShares uint64
	// CPUQuota and CPUPeriod are cfs quota/period in microseconds (from the
	// CPU limit); CPUQuota 0 means no limit.
	CPUQuota  int64
	CPUPeriod uint64
	// MemoryLimit is memory.limit_in_bytes; 0 means no limit.
	MemoryLimit int64
	// OOMScoreAdj is the process's oom_score_adj (by QoS class).
	OOMScoreAdj int
}

// Security is the subset of a securityContext the runtime applies.
type Security struct {
	RunAsUser                *int64
	RunAsGroup               *int64
	SupplementalGroups       []int64
	Privileged               bool
	ReadOnlyRootFilesystem   bool
	AllowPrivilegeEscalation *bool
	// CapAdd and CapDrop name capabilities as Kubernetes does ("NET_ADMIN",
	// "ALL"), without the CAP_ prefix.
	CapAdd  []string
	CapDrop []string
	// Sysctls are the pod's namespaced sysctls (name → value), set by the
	// OCI runtime inside the container's namespaces (IPC ones in its IPC
	// namespace, net.* in the pod's network namespace it joins).
	Sysctls map[string]string
}

// ContainerConfig is everything needed to create one container of a pod.
type ContainerConfig struct {
	PodUID       string
	PodNamespace string
	PodName      string
	// Name is the container's name in the pod; Attempt its restart count.
	Name    string
	Attempt uint32
	// Image is a local image reference that is already present.
	Image string
	// Command and Args have Kubernetes semantics: a nil Command runs the
	// image's ENTRYPOINT, and nil Args (with nil Command) the image's CMD.
	Command []string
	Args    []string
	// Env is KEY=VALUE, applied over the image's environment.
	Env        []string
	WorkingDir string
	Mounts     []Mount
	Hostname   string
	// NetNSPath is the pod's network namespace; empty with HostNetwork.
	NetNSPath   string
	HostNetwork bool
	// PIDNamespacePath is a process namespace to join instead of a new one
	// (/proc/<pid>/ns/pid of an ephemeral container's target).
	PIDNamespacePath string
	// RuntimeName is the containerd runtime of the pod's RuntimeClass
	// handler; empty means Config.RuntimeName.
	RuntimeName string
	// CgroupParent is the pod's cgroupfs path, e.g. /skiff/burstable/pod<uid>.
	CgroupParent string
	Resources    Resources
	Security     Security
	TTY          bool
	Stdin        bool
	StdinOnce    bool
	// LogPath is the CRI-format file the container's output goes to.
	LogPath string
	// Labels are stored on the containerd container beside the runtime's own.
	Labels map[string]string
}

// State is where a container is in its life.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// ContainerStatus is what the runtime knows about one container.
type ContainerStatus struct {
	ID           string
	PodUID       string
	PodNamespace string
	PodName      string
	Name         string
	Attempt      uint32
	Image        string
	// ImageID is the image's config digest (sha256:…).
	ImageID    string
	State      State
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	// Reason for an exited container: "Completed" (exit 0), "Error" or
	// "OOMKilled".
	Reason  string
	Pid     uint32
	LogPath string
	Labels  map[string]string
}

// TermSize is a terminal size for TTY sessions.
type TermSize struct {
	Width  uint16
	Height uint16
}

// ExecRequest runs a command in a running container.
type ExecRequest struct {
	Cmd    []string
	Stdin  io.Reader // nil: no stdin
	Stdout io.Writer // nil: discarded
	Stderr io.Writer // nil: discarded (ignored with TTY)
	TTY    bool
	Resize <-chan TermSize
}

// AttachRequest attaches to a running container's main process.
type AttachRequest struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool
	Resize <-chan TermSize
}
