package printers

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func hostRules(hosts ...string) []networkingv1.IngressRule {
	out := make([]networkingv1.IngressRule, len(hosts))
	for i, h := range hosts {
		out[i] = networkingv1.IngressRule{Host: h}
	}
	return out
}

func TestIngressCells(t *testing.T) {
	gk := schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}
	header := "Name;Class;Hosts;Address;Ports;Age"
	lb := networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
		{IP: "192.0.2.20"}, {Hostname: "lb.example.com"}, {IP: "192.0.2.10"}, {IP: "192.0.2.20"},
	}}}
	ing := func(class *string, rules []networkingv1.IngressRule, tls bool, status networkingv1.IngressStatus) *networkingv1.Ingress {
		i := &networkingv1.Ingress{ObjectMeta: objMeta("web", time.Hour), Spec: networkingv1.IngressSpec{IngressClassName: class, Rules: rules}, Status: status}
		if tls {
			i.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}}}
		}
		return i
	}
	runKindCases(t, []kindCase{
		{"tls ingress with addresses", gk, header, ing(ptr("traefik"), hostRules("a.example.com", "b.example.com"), true, lb),
			[]interface{}{"web", "traefik", "a.example.com,b.example.com", "192.0.2.10,192.0.2.20,lb.example.com", "80, 443", "60m"}},
		{"no class, no hosts", gk, header, ing(nil, hostRules(""), false, networkingv1.IngressStatus{}),
			[]interface{}{"web", "<none>", "*", "", "80", "60m"}},
		{"more hosts than three", gk, header, ing(nil, hostRules("", "a", "b", "c", "d"), false, networkingv1.IngressStatus{}),
			[]interface{}{"web", "<none>", "a,b,c + 2 more...", "", "80", "60m"}},
		{"exactly three hosts", gk, header, ing(nil, hostRules("a", "b", "c"), false, networkingv1.IngressStatus{}),
			[]interface{}{"web", "<none>", "a,b,c", "", "80", "60m"}},
		{"many rules but few hosts", gk, header, ing(nil, hostRules("a", "", "", ""), false, networkingv1.IngressStatus{}),
			[]interface{}{"web", "<none>", "a", "", "80", "60m"}},
	})
}

func TestOtherNetworkingCells(t *testing.T) {
	group := "networking.k8s.io"
	runKindCases(t, []kindCase{
		{"ingress class with parameters", schema.GroupKind{Group: group, Kind: "IngressClass"}, "Name;Controller;Parameters;Age",
			&networkingv1.IngressClass{ObjectMeta: objMeta("nginx", time.Hour), Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx",
				Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"}}},
			[]interface{}{"nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external-lb", "60m"}},
		{"ingress class without parameters", schema.GroupKind{Group: group, Kind: "IngressClass"}, "Name;Controller;Parameters;Age",
			&networkingv1.IngressClass{ObjectMeta: objMeta("traefik", time.Hour), Spec: networkingv1.IngressClassSpec{Controller: "traefik.io/ingress-controller"}},
			[]interface{}{"traefik", "traefik.io/ingress-controller", "<none>", "60m"}},
		{"network policy selecting pods", schema.GroupKind{Group: group, Kind: "NetworkPolicy"}, "Name;Pod-Selector;Age",
			&networkingv1.NetworkPolicy{ObjectMeta: objMeta("np", time.Hour), Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
			[]interface{}{"np", "app=db", "60m"}},
		{"network policy selecting all pods", schema.GroupKind{Group: group, Kind: "NetworkPolicy"}, "Name;Pod-Selector;Age",
			&networkingv1.NetworkPolicy{ObjectMeta: objMeta("deny-all", time.Hour)},
			[]interface{}{"deny-all", "<none>", "60m"}},
		{"service cidr", schema.GroupKind{Group: group, Kind: "ServiceCIDR"}, "Name;CIDRs;Age",
			&networkingv1.ServiceCIDR{ObjectMeta: objMeta("kubernetes", time.Hour), Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.43.0.0/16", "fd00:43::/112"}}},
			[]interface{}{"kubernetes", "10.43.0.0/16,fd00:43::/112", "60m"}},
		{"ip address of a service", schema.GroupKind{Group: group, Kind: "IPAddress"}, "Name;ParentRef",
			&networkingv1.IPAddress{ObjectMeta: objMeta("10.43.0.1", time.Hour), Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "Services", Namespace: "default", Name: "kubernetes"}}},
			[]interface{}{"10.43.0.1", "services/default/kubernetes"}},
		{"ip address of a cluster-scoped grouped owner", schema.GroupKind{Group: group, Kind: "IPAddress"}, "Name;ParentRef",
			&networkingv1.IPAddress{ObjectMeta: objMeta("10.43.0.2", time.Hour), Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "example.com", Resource: "gateways", Name: "gw"}}},
			[]interface{}{"10.43.0.2", "gateways.example.com/gw"}},
		{"ip address without owner", schema.GroupKind{Group: group, Kind: "IPAddress"}, "Name;ParentRef",
			&networkingv1.IPAddress{ObjectMeta: objMeta("10.43.0.3", time.Hour)},
			[]interface{}{"10.43.0.3", "<none>"}},
	})
}

func TestHorizontalPodAutoscalerCells(t *testing.T) {
	gk := schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}
	header := "Name;Reference;Targets;MinPods;MaxPods;Replicas;Age"
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(80))}}}
	mem := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("512Mi")}}}
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Target: autoscalingv2.MetricTarget{AverageValue: q("1k")}}}
	external := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Target: autoscalingv2.MetricTarget{AverageValue: q("30")}}}
	hpa := func(metrics []autoscalingv2.MetricSpec, current []autoscalingv2.MetricStatus) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: objMeta("web", time.Hour),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
				MinReplicas: ptr(int32(2)), MaxReplicas: 10, Metrics: metrics},
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 3, CurrentMetrics: current},
		}
	}
	row := func(targets string) []interface{} {
		return []interface{}{"web", "Deployment/web", targets, "2", int64(10), int64(3), "60m"}
	}
	cpuNow := autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
		Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(45))}}}
	runKindCases(t, []kindCase{
		{"cpu utilization with current value", gk, header, hpa([]autoscalingv2.MetricSpec{cpu}, []autoscalingv2.MetricStatus{cpuNow}), row("cpu: 45%/80%")},
		{"cpu and memory before metrics arrive", gk, header, hpa([]autoscalingv2.MetricSpec{cpu, mem}, nil), row("cpu: <unknown>/80%, memory: <unknown>/512Mi")},
		{"more than two metrics", gk, header, hpa([]autoscalingv2.MetricSpec{cpu, mem, pods, external}, nil),
			row("cpu: <unknown>/80%, memory: <unknown>/512Mi + 2 more...")},
		{"pods and external averages", gk, header, hpa([]autoscalingv2.MetricSpec{pods, external}, nil), row("<unknown>/1k, <unknown>/30 (avg)")},
		{"no metrics", gk, header, hpa(nil, nil), row("<none>")},
		{"min replicas unset", gk, header, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: objMeta("h", time.Hour), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5}},
			[]interface{}{"h", "/", "<none>", "<unset>", int64(5), int64(0), "60m"}},
	})
}
