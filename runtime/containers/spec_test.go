package containers

import (
	"context"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestProcessArgsFollowKubernetesSemantics(t *testing.T) {
	img := ocispec.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"default", "cmd"}}
	tests := []struct {
		name          string
		img           ocispec.ImageConfig
		command, args []string
		want          []string
	}{
		{name: "neither runs entrypoint and cmd", img: img, want: []string{"/entry", "default", "cmd"}},
		{name: "args replace cmd after the entrypoint", img: img, args: []string{"a"}, want: []string{"/entry", "a"}},
		{name: "command replaces entrypoint and drops cmd", img: img, command: []string{"/bin/x"}, want: []string{"/bin/x"}},
		{name: "command with args", img: img, command: []string{"/bin/x"}, args: []string{"a", "b"},
			want: []string{"/bin/x", "a", "b"}},
		{name: "no entrypoint: args are the whole command", img: ocispec.ImageConfig{Cmd: []string{"sh"}},
			args: []string{"echo", "hi"}, want: []string{"echo", "hi"}},
		{name: "no entrypoint: cmd", img: ocispec.ImageConfig{Cmd: []string{"sh"}}, want: []string{"sh"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := processArgs(tt.img, tt.command, tt.args)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if len(tt.img.Entrypoint) > 0 && &got[0] == &tt.img.Entrypoint[0] {
				t.Fatal("result aliases the image config")
			}
		})
	}
}

func TestCapabilitiesFollowKubernetesNames(t *testing.T) {
	base := []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_RAW"}
	tests := []struct {
		name      string
		sec       Security
		want      []string
		wantAbove int // at least this many capabilities (ALL)
	}{
		{name: "drop one", sec: Security{CapDrop: []string{"NET_RAW"}}, want: []string{"CAP_CHOWN", "CAP_KILL"}},
		{name: "add one with lowercase name", sec: Security{CapAdd: []string{"net_admin"}},
			want: []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_RAW", "CAP_NET_ADMIN"}},
		{name: "drop ALL", sec: Security{CapDrop: []string{"ALL"}}, want: nil},
		{name: "drop ALL add one", sec: Security{CapDrop: []string{"ALL"}, CapAdd: []string{"SYS_TIME"}},
			want: []string{"CAP_SYS_TIME"}},
		{name: "add ALL", sec: Security{CapAdd: []string{"ALL"}}, wantAbove: 38},
		{name: "prefixed names are accepted", sec: Security{CapDrop: []string{"CAP_KILL"}}, want: []string{"CAP_CHOWN", "CAP_NET_RAW"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &oci.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
				Bounding: slices.Clone(base), Effective: slices.Clone(base), Permitted: slices.Clone(base),
			}}, Linux: &specs.Linux{}}
			for _, o := range securityOptions(tt.sec) {
				if err := o(context.Background(), nil, &containers.Container{}, s); err != nil {
					t.Fatal(err)
				}
			}
			got := s.Process.Capabilities.Bounding
			if tt.wantAbove > 0 {
				if len(got) < tt.wantAbove {
					t.Fatalf("ALL gave %d capabilities", len(got))
				}
				return
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(s.Process.Capabilities.Effective, tt.want) {
				t.Fatalf("bounding %q effective %q, want %q", got, s.Process.Capabilities.Effective, tt.want)
			}
		})
	}
}

func TestNoNewPrivilegesOnlyWhenEscalationIsDisallowed(t *testing.T) {
	f, tr := false, true
	tests := []struct {
		name string
		sec  Security
		want bool
	}{
		{name: "unset allows escalation", sec: Security{}, want: false},
		{name: "explicitly allowed", sec: Security{AllowPrivilegeEscalation: &tr}, want: false},
		{name: "explicitly disallowed", sec: Security{AllowPrivilegeEscalation: &f}, want: true},
		{name: "privileged ignores the setting", sec: Security{Privileged: true, AllowPrivilegeEscalation: &f}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// containerd's default spec, which turns no_new_privs on.
			s := mustSpec(t, namespaces.WithNamespace(context.Background(), "test"), securityOptions(tt.sec))
			if s.Process.NoNewPrivileges != tt.want {
				t.Fatalf("NoNewPrivileges = %v, want %v", s.Process.NoNewPrivileges, tt.want)
			}
		})
	}
}

func mustSpec(t *testing.T, ctx context.Context, opts []oci.SpecOpts) oci.Spec {
	t.Helper()
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c1"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return *s
}

func TestSysctlsGoToLinuxSysctl(t *testing.T) {
	tests := []struct {
		name string
		sec  Security
		want map[string]string
	}{
		{name: "none leaves the default", sec: Security{}, want: nil},
		{name: "pod sysctls are set", sec: Security{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_local_port_range": "1024 65000"}},
			want: map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_local_port_range": "1024 65000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSpec(t, namespaces.WithNamespace(context.Background(), "test"), securityOptions(tt.sec))
			if len(s.Linux.Sysctl) != len(tt.want) {
				t.Fatalf("sysctl %v, want %v", s.Linux.Sysctl, tt.want)
			}
			for k, v := range tt.want {
				if s.Linux.Sysctl[k] != v {
					t.Fatalf("sysctl %v, want %v", s.Linux.Sysctl, tt.want)
				}
			}
		})
	}
}
