package printers

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

func servicePrinter() Printer {
	spec := corev1.ServiceSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Type", "string", spec["type"]),
			column("Cluster-IP", "string", spec["clusterIP"]),
			column("External-IP", "string", spec["externalIPs"]),
			column("Port(s)", "string", spec["ports"]),
			ageColumn(),
			wideColumn("Selector", "string", spec["selector"]),
		},
		Cells: serviceCells,
	}
}

func serviceCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	svc, err := typed[corev1.Service](obj)
	if err != nil {
		return nil, err
	}
	clusterIP := "<none>"
	switch {
	case len(svc.Spec.ClusterIPs) > 0:
		clusterIP = svc.Spec.ClusterIPs[0]
	case svc.Spec.ClusterIP != "":
		// Only clusterIPs is consulted upstream, where the apiserver always
		// fills it from clusterIP; this covers objects that skipped that.
		clusterIP = svc.Spec.ClusterIP
	}
	ports := makePortString(svc.Spec.Ports)
	if ports == "" {
		ports = "<none>"
	}
	return []interface{}{
		svc.Name,
		string(svc.Spec.Type),
		clusterIP,
		serviceExternalIP(svc),
		ports,
		translateTimestampSince(svc.CreationTimestamp, now),
		labels.FormatLabels(svc.Spec.Selector),
	}, nil
}

func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := loadBalancerAddresses(svc.Status.LoadBalancer.Ingress)
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(append(lb, svc.Spec.ExternalIPs...), ",")
		}
		if len(lb) > 0 {
			return strings.Join(lb, ",")
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// loadBalancerAddresses returns the sorted, unique IPs (or hostnames, for
// ingress points without an IP) of a load balancer.
func loadBalancerAddresses(ingress []corev1.LoadBalancerIngress) []string {
	addrs := make([]string, 0, len(ingress))
	for _, in := range ingress {
		if in.IP != "" {
			addrs = append(addrs, in.IP)
		} else if in.Hostname != "" {
			addrs = append(addrs, in.Hostname)
		}
	}
	return sortedUnique(addrs)
}

func sortedUnique(items []string) []string {
	sort.Strings(items)
	out := items[:0]
	for i, s := range items {
		if i == 0 || s != items[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// makePortString prints port/protocol, or port:nodePort/protocol when a
// node port is allocated.
func makePortString(ports []corev1.ServicePort) string {
	pieces := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			pieces[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(pieces, ",")
}

func endpointsPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"]),
			ageColumn(),
		},
		Cells: endpointsCells,
	}
}

func endpointsCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ep, err := typed[corev1.Endpoints](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{ep.Name, formatEndpoints(ep), translateTimestampSince(ep.CreationTimestamp, now)}, nil
}

// formatEndpoints lists up to three ip:port pairs (bare IPs for headless
// subsets without ports).
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var items []string
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				items = append(items, a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				items = append(items, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	return listWithMore(items, 3, "")
}
