package printers

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// labelNodeRolePrefix marks a role with node-role.kubernetes.io/<role>.
	labelNodeRolePrefix = "node-role.kubernetes.io/"
	// nodeLabelRole is the older form, kubernetes.io/role=<role>.
	nodeLabelRole = "kubernetes.io/role"
)

func nodePrinter() Printer {
	info := corev1.NodeSystemInfo{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", "The status of the node"),
			column("Roles", "string", "The roles of the node"),
			ageColumn(),
			column("Version", "string", info["kubeletVersion"]),
			wideColumn("Internal-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
			wideColumn("External-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
			wideColumn("OS-Image", "string", info["osImage"]),
			wideColumn("Kernel-Version", "string", info["kernelVersion"]),
			wideColumn("Container-Runtime", "string", info["containerRuntimeVersion"]),
		},
		Cells: nodeCells,
	}
}

func nodeCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	node, err := typed[corev1.Node](obj)
	if err != nil {
		return nil, err
	}
	roles := strings.Join(findNodeRoles(node), ",")
	if roles == "" {
		roles = "<none>"
	}
	ni := node.Status.NodeInfo
	return []interface{}{
		node.Name,
		nodeStatus(node),
		roles,
		translateTimestampSince(node.CreationTimestamp, now),
		ni.KubeletVersion,
		nodeAddress(node, corev1.NodeInternalIP),
		nodeAddress(node, corev1.NodeExternalIP),
		orUnknown(ni.OSImage),
		orUnknown(ni.KernelVersion),
		orUnknown(ni.ContainerRuntimeVersion),
	}, nil
}

// nodeStatus is Ready, NotReady or Unknown (no Ready condition yet), with
// SchedulingDisabled appended for a cordoned node.
func nodeStatus(node *corev1.Node) string {
	status := "Unknown"
	// The last Ready condition wins, as upstream indexes conditions by type.
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			status = string(c.Type)
		} else {
			status = "Not" + string(c.Type)
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// findNodeRoles returns the sorted, de-duplicated roles named by
// node-role.kubernetes.io/<role> and kubernetes.io/role=<role> labels.
func findNodeRoles(node *corev1.Node) []string {
	set := map[string]bool{}
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, labelNodeRolePrefix):
			if role := strings.TrimPrefix(k, labelNodeRolePrefix); role != "" {
				set[role] = true
			}
		case k == nodeLabelRole && v != "":
			set[v] = true
		}
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

// nodeAddress returns the node's first address of the type, or <none>.
func nodeAddress(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

func namespacePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", "The status of the namespace"),
			ageColumn(),
		},
		Cells: namespaceCells,
	}
}

func namespaceCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ns, err := typed[corev1.Namespace](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{ns.Name, string(ns.Status.Phase), translateTimestampSince(ns.CreationTimestamp, now)}, nil
}

func componentStatusPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", "Status of the component conditions"),
			column("Message", "string", "Message of the component conditions"),
			column("Error", "string", "Error of the component conditions"),
		},
		Cells: componentStatusCells,
	}
}

func componentStatusCells(obj runtime.Object, _ time.Time) ([]interface{}, error) {
	cs, err := typed[corev1.ComponentStatus](obj)
	if err != nil {
		return nil, err
	}
	status, message, errText := "Unknown", "", ""
	for _, c := range cs.Conditions {
		if c.Type != corev1.ComponentHealthy {
			continue
		}
		status = "Unhealthy"
		if c.Status == corev1.ConditionTrue {
			status = "Healthy"
		}
		message, errText = c.Message, c.Error
		break
	}
	return []interface{}{cs.Name, status, message, errText}, nil
}
