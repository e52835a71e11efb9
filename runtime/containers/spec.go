package containers

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// defaultCFSPeriod is the kernel's default cfs period in microseconds.
const defaultCFSPeriod = 100000

// processArgs applies Kubernetes command semantics to the image config: a
// nil Command runs the image's Entrypoint with Args (or, without Args, the
// image's Cmd); a Command replaces the Entrypoint and ignores the image's Cmd.
func processArgs(img ocispec.ImageConfig, command, args []string) []string {
	if len(command) > 0 {
		return append(slices.Clone(command), args...)
	}
	out := slices.Clone(img.Entrypoint)
	if len(args) > 0 {
		return append(out, args...)
	}
	return append(out, img.Cmd...)
}

// capName turns a Kubernetes capability name ("NET_ADMIN") into the OCI one
// ("CAP_NET_ADMIN").
func capName(c string) string {
	c = strings.ToUpper(c)
	if strings.HasPrefix(c, "CAP_") {
		return c
	}
	return "CAP_" + c
}

// hasAll reports whether a Kubernetes capability list names "ALL".
func hasAll(caps []string) bool {
	return slices.ContainsFunc(caps, func(c string) bool { return strings.EqualFold(c, "ALL") })
}

// capNames converts a capability list, leaving out "ALL".
func capNames(caps []string) []string {
	var out []string
	for _, c := range caps {
		if !strings.EqualFold(c, "ALL") {
			out = append(out, capName(c))
		}
	}
	return out
}

// specOptions builds the OCI spec options for cc; image is the container's
// image, imgCfg its config, id the container ID (for the cgroup path).
// swapAccounting says memory.memsw exists (the swap limit is then set to
// the memory limit, so the container cannot use swap, as the kubelet does).
func specOptions(image oci.Image, imgCfg ocispec.ImageConfig, cc ContainerConfig, id string, swapAccounting bool) []oci.SpecOpts {
	opts := []oci.SpecOpts{
		oci.WithImageConfig(image),
		oci.WithProcessArgs(processArgs(imgCfg, cc.Command, cc.Args)...),
	}
	if cc.TTY {
		opts = append(opts, oci.WithEnv([]string{"TERM=xterm"})) // as the kubelet; Env may override
	}
	if len(cc.Env) > 0 {
		opts = append(opts, oci.WithEnv(cc.Env))
	}
	if cc.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(cc.WorkingDir))
	}
	opts = append(opts, namespaceOptions(cc)...)
	opts = append(opts, withCgroupfsMount)
	if len(cc.Mounts) > 0 {
		opts = append(opts, oci.WithMounts(ociMounts(cc.Mounts)))
	}
	if cc.CgroupParent != "" {
		opts = append(opts, oci.WithCgroup(path.Join(cc.CgroupParent, id)))
	}
	opts = append(opts, resourceOptions(cc.Resources, swapAccounting)...)
	opts = append(opts, securityOptions(cc.Security)...)
	if cc.TTY {
		opts = append(opts, oci.WithTTY)
	}
	return opts
}

// namespaceOptions joins the pod's network namespace (or the host's, with
// the host's UTS namespace as the kubelet does for hostNetwork pods).
func namespaceOptions(cc ContainerConfig) []oci.SpecOpts {
	var opts []oci.SpecOpts
	switch {
	case cc.HostNetwork:
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostNamespace(specs.UTSNamespace))
	case cc.NetNSPath != "":
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: cc.NetNSPath}))
	}
	if cc.Hostname != "" && !cc.HostNetwork {
		opts = append(opts, oci.WithHostname(cc.Hostname))
	}
	if cc.PIDNamespacePath != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.PIDNamespace, Path: cc.PIDNamespacePath}))
	}
	return opts
}

// withCgroupfsMount mounts the container's cgroups read-only at
// /sys/fs/cgroup, as the CRI plugin does (privileged makes it writable).
func withCgroupfsMount(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	for _, m := range s.Mounts {
		if m.Destination == "/sys/fs/cgroup" {
			return nil
		}
	}
	s.Mounts = append(s.Mounts, specs.Mount{
		Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup",
		Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"},
	})
	return nil
}

// ociMounts turns bind mounts into OCI mounts (recursive, private).
func ociMounts(ms []Mount) []specs.Mount {
	out := make([]specs.Mount, 0, len(ms))
	for _, m := range ms {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		out = append(out, specs.Mount{
			Destination: m.ContainerPath,
			Source:      m.HostPath,
			Type:        "bind",
			Options:     []string{"rbind", "rprivate", mode},
		})
	}
	return out
}

// resourceOptions sets cgroup limits and the OOM score.
func resourceOptions(r Resources, swapAccounting bool) []oci.SpecOpts {
	var opts []oci.SpecOpts
	if r.CPUShares > 0 {
		opts = append(opts, oci.WithCPUShares(r.CPUShares))
	}
	if r.CPUQuota > 0 {
		period := r.CPUPeriod
		if period == 0 {
			period = defaultCFSPeriod
		}
		opts = append(opts, oci.WithCPUCFS(r.CPUQuota, period))
	}
	if r.MemoryLimit > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(r.MemoryLimit)))
		if swapAccounting {
			opts = append(opts, oci.WithMemorySwap(r.MemoryLimit))
		}
	}
	adj := r.OOMScoreAdj
	opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.OOMScoreAdj = &adj
		return nil
	})
	return opts
}

// securityOptions applies the user, groups, privileges and capabilities.
func securityOptions(sec Security) []oci.SpecOpts {
	var opts []oci.SpecOpts
	opts = append(opts, userOptions(sec)...)
	if sec.Privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithHostDevices, oci.WithAllDevicesAllowed)
	} else {
		if hasAll(sec.CapAdd) {
			opts = append(opts, oci.WithAllKnownCapabilities)
		}
		if hasAll(sec.CapDrop) {
			opts = append(opts, oci.WithCapabilities(nil))
		}
		if add := capNames(sec.CapAdd); len(add) > 0 {
			opts = append(opts, oci.WithAddedCapabilities(add))
		}
		if drop := capNames(sec.CapDrop); len(drop) > 0 {
			opts = append(opts, oci.WithDroppedCapabilities(drop))
		}
	}
	// As the kubelet: no_new_privs only when escalation is explicitly
	// disallowed (a nil AllowPrivilegeEscalation means allowed), and never
	// for a privileged container. Set both ways: containerd's default spec
	// turns it on.
	nnp := !sec.Privileged && sec.AllowPrivilegeEscalation != nil && !*sec.AllowPrivilegeEscalation
	opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.NoNewPrivileges = nnp
		return nil
	})
	if len(sec.Sysctls) > 0 {
		opts = append(opts, withSysctls(sec.Sysctls))
	}
	if sec.ReadOnlyRootFilesystem {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	return opts
}

// withSysctls puts sysctls in linux.sysctl: runc writes them after joining
// the container's namespaces, so IPC sysctls land in its IPC namespace and
// net.* ones in the pod's network namespace.
func withSysctls(sysctls map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		for k, v := range sysctls {
			s.Linux.Sysctl[k] = v
		}
		return nil
	}
}

// userOptions sets the process user: RunAsUser (with its primary group from
// the image's /etc/passwd unless RunAsGroup is set), the image's groups for
// that user, and the supplemental groups.
func userOptions(sec Security) []oci.SpecOpts {
	var opts []oci.SpecOpts
	switch {
	case sec.RunAsUser != nil && sec.RunAsGroup != nil:
		opts = append(opts, oci.WithUIDGID(uint32(*sec.RunAsUser), uint32(*sec.RunAsGroup)))
	case sec.RunAsUser != nil:
		opts = append(opts, oci.WithUserID(uint32(*sec.RunAsUser)))
	case sec.RunAsGroup != nil:
		gid := uint32(*sec.RunAsGroup)
		opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			if s.Process == nil {
				s.Process = &specs.Process{}
			}
			s.Process.User.GID = gid
			return nil
		})
	}
	if sec.RunAsUser != nil {
		opts = append(opts, oci.WithAdditionalGIDs(strconv.FormatInt(*sec.RunAsUser, 10)))
	}
	if len(sec.SupplementalGroups) > 0 {
		groups := sec.SupplementalGroups
		opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			if s.Process == nil {
				s.Process = &specs.Process{}
			}
			for _, g := range groups {
				if !slices.Contains(s.Process.User.AdditionalGids, uint32(g)) {
					s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, uint32(g))
				}
			}
			return nil
		})
	}
	if sec.RunAsGroup != nil {
		gid := uint32(*sec.RunAsGroup)
		opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			if !slices.Contains(s.Process.User.AdditionalGids, gid) {
				s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, gid)
			}
			return nil
		})
	}
	return opts
}
