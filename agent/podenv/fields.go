package podenv

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrUnsupportedField is returned (wrapped) for a fieldPath or resource the
// downward API does not offer.
var ErrUnsupportedField = errors.New("unsupported downward API field")

// FieldValue returns the downward-API value of fieldPath for pod:
// metadata.name, metadata.namespace, metadata.uid, metadata.labels,
// metadata.annotations (all of them, as key="value" lines),
// metadata.labels['k'], metadata.annotations['k'], spec.nodeName,
// spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP and
// status.podIPs (comma-separated). podIP and hostIP override the pod's
// status when not empty.
func FieldValue(pod *corev1.Pod, fieldPath, podIP, hostIP string) (string, error) {
	if k, ok := subscript(fieldPath, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(fieldPath, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(hostIP, hostIPs(pod)), nil
	case "status.hostIPs":
		return strings.Join(ips(hostIP, hostIPs(pod)), ","), nil
	case "status.podIP":
		return first(podIP, podIPs(pod)), nil
	case "status.podIPs":
		return strings.Join(ips(podIP, podIPs(pod)), ","), nil
	}
	return "", fmt.Errorf("%w: fieldPath %q", ErrUnsupportedField, fieldPath)
}

func podIPs(pod *corev1.Pod) []string {
	var out []string
	for _, ip := range pod.Status.PodIPs {
		out = append(out, ip.IP)
	}
	if len(out) == 0 && pod.Status.PodIP != "" {
		out = append(out, pod.Status.PodIP)
	}
	return out
}

func hostIPs(pod *corev1.Pod) []string {
	var out []string
	for _, ip := range pod.Status.HostIPs {
		out = append(out, ip.IP)
	}
	if len(out) == 0 && pod.Status.HostIP != "" {
		out = append(out, pod.Status.HostIP)
	}
	return out
}

// first is primary, or else the first of all.
func first(primary string, all []string) string {
	if primary == "" && len(all) > 0 {
		return all[0]
	}
	return primary
}

// ips puts primary first, followed by the others that differ from it.
func ips(primary string, all []string) []string {
	if primary == "" {
		return all
	}
	out := []string{primary}
	for _, ip := range all {
		if ip != primary {
			out = append(out, ip)
		}
	}
	return out
}

// subscript parses prefix['key'] (or prefix["key"]) and returns key.
func subscript(s, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(s, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return "", false
	}
	rest = strings.TrimSuffix(rest, "]")
	if len(rest) >= 2 && (rest[0] == '\'' || rest[0] == '"') && rest[len(rest)-1] == rest[0] {
		return rest[1 : len(rest)-1], true
	}
	return "", false
}

// FormatMap renders a map as the downward API does: sorted key="value"
// lines (values Go-quoted), without a trailing newline.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// ResourceValue returns the downward-API value of a resourceFieldRef for
// the named container of pod: limits.cpu, limits.memory,
// limits.ephemeral-storage, requests.cpu, requests.memory,
// requests.ephemeral-storage (and hugepages-*), divided by divisor (default
// 1) and rounded up; cpu values are in whole cores (or divisor units, e.g.
// "1m"). An unset (or zero) cpu, memory or ephemeral-storage limit takes
// the pod-level limit when set, else the node's allocatable (as the
// kubelet's defaultPodLimitsForDownwardAPI); an unset request defaults to
// its limit.
func ResourceValue(pod *corev1.Pod, containerName, res string, divisor resource.Quantity, allocatable corev1.ResourceList) (string, error) {
	c := findContainer(pod, containerName)
	if c == nil {
		return "", fmt.Errorf("container %q not found in pod %s/%s for resourceFieldRef %s", containerName, pod.Namespace, pod.Name, res)
	}
	kind, name, ok := strings.Cut(res, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("%w: resource %q", ErrUnsupportedField, res)
	}
	rn := corev1.ResourceName(name)
	switch {
	case rn == corev1.ResourceCPU, rn == corev1.ResourceMemory, rn == corev1.ResourceEphemeralStorage,
		strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("%w: resource %q", ErrUnsupportedField, res)
	}
	var q resource.Quantity
	var found bool
	if kind == "limits" {
		q = effectiveLimit(pod, c, rn, allocatable)
	} else if q, found = c.Resources.Requests[rn]; !found {
		q = c.Resources.Limits[rn]
	}
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if rn == corev1.ResourceCPU {
		v := int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))
		return strconv.FormatInt(v, 10), nil
	}
	v := int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))
	return strconv.FormatInt(v, 10), nil
}

// NeedsAllocatable reports whether resourceFieldRef res of the named
// container defaults to the node's allocatable: a cpu, memory or
// ephemeral-storage limit the container does not set (or sets to zero).
// Callers read the Node only then.
func NeedsAllocatable(pod *corev1.Pod, containerName, res string) bool {
	c := findContainer(pod, containerName)
	name, ok := strings.CutPrefix(res, "limits.")
	if c == nil || !ok {
		return false
	}
	rn := corev1.ResourceName(name)
	if rn != corev1.ResourceCPU && rn != corev1.ResourceMemory && rn != corev1.ResourceEphemeralStorage {
		return false
	}
	q, set := c.Resources.Limits[rn]
	return !set || q.IsZero()
}

// effectiveLimit is c's limit of rn with the kubelet's downward-API
// defaults. Hugepages are never defaulted: they are never overcommitted,
// so a container using them always has a limit.
func effectiveLimit(pod *corev1.Pod, c *corev1.Container, rn corev1.ResourceName, allocatable corev1.ResourceList) resource.Quantity {
	if q, ok := c.Resources.Limits[rn]; ok && !q.IsZero() {
		return q
	}
	if rn != corev1.ResourceCPU && rn != corev1.ResourceMemory && rn != corev1.ResourceEphemeralStorage {
		return c.Resources.Limits[rn]
	}
	def, ok := allocatable[rn]
	if !ok {
		return c.Resources.Limits[rn]
	}
	// Pod-level resources (cpu and memory only) cap every container.
	if pr := pod.Spec.Resources; pr != nil && rn != corev1.ResourceEphemeralStorage {
		if q, ok := pr.Limits[rn]; ok && !q.IsZero() {
			def = q
		}
	}
	return def
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
