package nodestatus

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// host reads the machine facts a Node reports. root prefixes every path
// (tests point it at a fake tree); "" is the real machine.
type host struct {
	root string
}

func (h host) path(p string) string { return filepath.Join("/", h.root, p) }

// readTrimmed is the file's first line without surrounding spaces, or "" if
// it cannot be read.
func (h host) readTrimmed(p string) string {
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return ""
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.TrimSpace(string(line))
}

// memTotal is MemTotal from /proc/meminfo, in bytes.
func (h host) memTotal() (int64, error) {
	f, err := os.Open(h.path("/proc/meminfo"))
	if err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo MemTotal %q: %w", fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	return 0, fmt.Errorf("meminfo has no MemTotal line")
}

// osImage is PRETTY_NAME from /etc/os-release (or /usr/lib/os-release).
func (h host) osImage() string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(h.path(p))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
				if u, err := strconv.Unquote(v); err == nil {
					return u
				}
				return strings.Trim(v, `"'`)
			}
		}
	}
	return "Linux"
}

// systemInfo is what the kubelet reports as status.nodeInfo.
func (h host) systemInfo(runtimeVersion, kubeletVersion string) corev1.NodeSystemInfo {
	machineID := h.readTrimmed("/etc/machine-id")
	if machineID == "" {
		machineID = h.readTrimmed("/var/lib/dbus/machine-id")
	}
	return corev1.NodeSystemInfo{
		MachineID:               machineID,
		SystemUUID:              h.readTrimmed("/sys/class/dmi/id/product_uuid"),
		BootID:                  h.readTrimmed("/proc/sys/kernel/random/boot_id"),
		KernelVersion:           h.readTrimmed("/proc/sys/kernel/osrelease"),
		OSImage:                 h.osImage(),
		ContainerRuntimeVersion: runtimeVersion,
		KubeletVersion:          kubeletVersion,
		KubeProxyVersion:        kubeletVersion,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
	}
}

// capacity measures the node: CPUs, memory, the data dir's filesystem, the
// pod limit and (empty) huge pages. Entries of override replace measured
// ones.
func (h host) capacity(dataDir string, override corev1.ResourceList) (corev1.ResourceList, error) {
	out := corev1.ResourceList{
		corev1.ResourceCPU:                     *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods:                    *resource.NewQuantity(110, resource.DecimalSI),
		corev1.ResourceHugePagesPrefix + "2Mi": *resource.NewQuantity(0, resource.DecimalSI),
		corev1.ResourceHugePagesPrefix + "1Gi": *resource.NewQuantity(0, resource.DecimalSI),
		corev1.ResourceMemory:                  resource.Quantity{},
		corev1.ResourceEphemeralStorage:        resource.Quantity{},
	}
	if _, ok := override[corev1.ResourceMemory]; !ok {
		mem, err := h.memTotal()
		if err != nil {
			return nil, err
		}
		out[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	if _, ok := override[corev1.ResourceEphemeralStorage]; !ok {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dataDir, &st); err != nil {
			return nil, fmt.Errorf("statfs %s: %w", dataDir, err)
		}
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI)
	}
	for name, q := range override {
		out[name] = q.DeepCopy()
	}
	return out, nil
}

// DetectNodeIPs finds the node's address when --node-ip is not given: the
// IPv4 address of the interface that holds the default route, else the
// first global unicast address of any interface.
func DetectNodeIPs() ([]net.IP, error) {
	return host{}.detectNodeIPs()
}

func (h host) detectNodeIPs() ([]net.IP, error) {
	if name := h.defaultRouteInterface(); name != "" {
		if ip := interfaceIPv4(name); ip != nil {
			return []net.IP{ip}, nil
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	var v6 net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || !ipn.IP.IsGlobalUnicast() {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil {
			return []net.IP{ip4}, nil
		}
		if v6 == nil {
			v6 = ipn.IP
		}
	}
	if v6 != nil {
		return []net.IP{v6}, nil
	}
	return nil, fmt.Errorf("no global unicast address on any interface: give --node-ip")
}

// defaultRouteInterface is the interface of the IPv4 default route in
// /proc/net/route, or "".
func (h host) defaultRouteInterface() string {
	b, err := os.ReadFile(h.path("/proc/net/route"))
	if err != nil {
		return ""
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if i == 0 || len(f) < 8 {
			continue
		}
		if f[1] == "00000000" && f[7] == "00000000" {
			return f[0]
		}
	}
	return ""
}

func interfaceIPv4(name string) net.IP {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() && ipn.IP.To4() != nil {
			return ipn.IP.To4()
		}
	}
	return nil
}
