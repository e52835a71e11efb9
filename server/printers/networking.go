package printers

import (
	"fmt"
	"strings"
	"time"

	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func ingressPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Class", "string", "The name of the IngressClass resource that should be used for additional configuration"),
			column("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
			column("Address", "string", "Address is a list containing ingress points for the load-balancer"),
			column("Ports", "string", "Ports of TLS configurations that open"),
			ageColumn(),
		},
		Cells: ingressCells,
	}
}

func ingressCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ing, err := typed[networkingv1.Ingress](obj)
	if err != nil {
		return nil, err
	}
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	addrs := make([]string, 0, len(ing.Status.LoadBalancer.Ingress))
	for _, in := range ing.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			addrs = append(addrs, in.IP)
		} else if in.Hostname != "" {
			addrs = append(addrs, in.Hostname)
		}
	}
	ports := "80"
	if len(ing.Spec.TLS) != 0 {
		ports = "80, 443"
	}
	return []interface{}{
		ing.Name,
		class,
		formatHosts(ing.Spec.Rules),
		strings.Join(sortedUnique(addrs), ","),
		ports,
		translateTimestampSince(ing.CreationTimestamp, now),
	}, nil
}

// formatHosts lists the first three hosts. Upstream's "more" count is of
// all rules minus three, whether or not the skipped rules had a host, and
// only kicks in once a rule follows the third host.
func formatHosts(rules []networkingv1.IngressRule) string {
	const max = 3
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == max {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	joined := strings.Join(hosts, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", joined, len(rules)-max)
	}
	return joined
}

func ingressClassPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Controller", "string", "Controller that is responsible for handling this class"),
			column("Parameters", "string", "A reference to a resource with additional parameters"),
			ageColumn(),
		},
		Cells: ingressClassCells,
	}
}

func ingressClassCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ic, err := typed[networkingv1.IngressClass](obj)
	if err != nil {
		return nil, err
	}
	params := "<none>"
	if p := ic.Spec.Parameters; p != nil {
		params = p.Kind
		if p.APIGroup != nil {
			params += "." + *p.APIGroup
		}
		params += "/" + p.Name
	}
	return []interface{}{ic.Name, ic.Spec.Controller, params, translateTimestampSince(ic.CreationTimestamp, now)}, nil
}

func networkPolicyPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Pod-Selector", "string", extensionsv1beta1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]),
			ageColumn(),
		},
		Cells: networkPolicyCells,
	}
}

func networkPolicyCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	np, err := typed[networkingv1.NetworkPolicy](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), translateTimestampSince(np.CreationTimestamp, now)}, nil
}

func serviceCIDRPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("CIDRs", "string", networkingv1beta1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]),
			ageColumn(),
		},
		Cells: serviceCIDRCells,
	}
}

func serviceCIDRCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	sc, err := typed[networkingv1.ServiceCIDR](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{sc.Name, strings.Join(sc.Spec.CIDRs, ","), translateTimestampSince(sc.CreationTimestamp, now)}, nil
}

// ipAddressPrinter has no Age column, as upstream (whose rows carry a stray
// third cell that kubectl never shows).
func ipAddressPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("ParentRef", "string", networkingv1beta1.IPAddressSpec{}.SwaggerDoc()["parentRef"]),
		},
		Cells: ipAddressCells,
	}
}

// ipAddressCells names the owner as resource.group[/namespace]/name.
func ipAddressCells(obj runtime.Object, _ time.Time) ([]interface{}, error) {
	ip, err := typed[networkingv1.IPAddress](obj)
	if err != nil {
		return nil, err
	}
	parent := "<none>"
	if ref := ip.Spec.ParentRef; ref != nil {
		parent = strings.ToLower(schema.GroupResource{Group: ref.Group, Resource: ref.Resource}.String())
		if ref.Namespace != "" {
			parent += "/" + ref.Namespace
		}
		parent += "/" + ref.Name
	}
	return []interface{}{ip.Name, parent}, nil
}
