package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validService() *corev1.Service {
	return defaulted(&corev1.Service{ObjectMeta: objMeta("web"), Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}, {Name: "https", Port: 443}},
	}})
}

func TestValidateService(t *testing.T) {
	runCreateCases(t, validService, []errCase[*corev1.Service]{
		{"name must be a DNS label", func(s *corev1.Service) { s.Name = "web.example" }, field.ErrorTypeInvalid, "metadata.name", ""},
		{"ports required", func(s *corev1.Service) { s.Spec.Ports = nil }, field.ErrorTypeRequired, "spec.ports", ""},
		{"port range", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }, field.ErrorTypeInvalid, "spec.ports[0].port", "between 1 and 65535"},
		{"target port range", func(s *corev1.Service) { s.Spec.Ports[1].TargetPort = intstr.FromInt32(70000) },
			field.ErrorTypeInvalid, "spec.ports[1].targetPort", ""},
		{"node port range", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			s.Spec.Ports[0].NodePort = 70000
		}, field.ErrorTypeInvalid, "spec.ports[0].nodePort", ""},
		{"node port not for ClusterIP", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			field.ErrorTypeForbidden, "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'"},
		{"protocol enum", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "HTTP" }, field.ErrorTypeNotSupported, "spec.ports[0].protocol", ""},
		{"names required with several ports", func(s *corev1.Service) { s.Spec.Ports[1].Name = "" }, field.ErrorTypeRequired, "spec.ports[1].name", ""},
		{"port names unique", func(s *corev1.Service) { s.Spec.Ports[1].Name = "http" }, field.ErrorTypeDuplicate, "spec.ports[1].name", ""},
		{"port and protocol pairs unique", func(s *corev1.Service) { s.Spec.Ports[1].Port = 80 }, field.ErrorTypeDuplicate, "spec.ports[1]", ""},
		{"type enum", func(s *corev1.Service) { s.Spec.Type = "Internal" }, field.ErrorTypeNotSupported, "spec.type", ""},
		{"external name required for ExternalName", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, SessionAffinity: corev1.ServiceAffinityNone}
		}, field.ErrorTypeRequired, "spec.externalName", ""},
		{"cluster IP syntax", func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0.300" },
			field.ErrorTypeInvalid, "spec.clusterIP", "must be empty, 'None', or a valid IP address"},
		{"headless not allowed for NodePort", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}, field.ErrorTypeInvalid, "spec.clusterIPs[0]", "may not be set to 'None' for NodePort services"},
		{"session affinity enum", func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" }, field.ErrorTypeNotSupported, "spec.sessionAffinity", ""},
		{"client IP affinity needs config", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP },
			field.ErrorTypeRequired, "spec.sessionAffinityConfig", "when session affinity type is ClientIP"},
		{"affinity timeout at most a day", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(90000))}}
		}, field.ErrorTypeInvalid, "spec.sessionAffinityConfig.clientIP.timeoutSeconds", ""},
		{"external traffic policy only for external services", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}, field.ErrorTypeInvalid, "spec.externalTrafficPolicy", "may only be set for externally-accessible services"},
		{"internal traffic policy required", func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = nil },
			field.ErrorTypeRequired, "spec.internalTrafficPolicy", ""},
		{"selector is a label map", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "a b"} },
			field.ErrorTypeInvalid, "spec.selector", ""},
		{"external IPs may not be loopback", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} },
			field.ErrorTypeInvalid, "spec.externalIPs[0]", "loopback"},
	})
}

func TestValidateServiceAcceptsOtherShapes(t *testing.T) {
	headless := defaulted(&corev1.Service{ObjectMeta: objMeta("db"), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}})
	external := defaulted(&corev1.Service{ObjectMeta: objMeta("ext"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com."}})
	lb := defaulted(&corev1.Service{ObjectMeta: objMeta("lb"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
		Ports: []corev1.ServicePort{{Port: 443, NodePort: 31443}}, LoadBalancerSourceRanges: []string{"10.0.0.0/8"}}})
	for name, svc := range map[string]*corev1.Service{"headless without ports": headless, "external name": external, "load balancer": lb} {
		t.Run(name, func(t *testing.T) { expectNoErrors(t, Validate(svc)) })
	}
}

func TestValidateServiceUpdate(t *testing.T) {
	storedService := func() *corev1.Service {
		s := stored(validService())
		s.Spec.ClusterIP = "10.43.0.10"
		s.Spec.ClusterIPs = []string{"10.43.0.10"}
		return s
	}
	runUpdateCases(t, storedService, []updateCase[*corev1.Service]{
		{"ports may change", func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 }, "", "", ""},
		{"type may become NodePort", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}, "", "", ""},
		{"cluster IP is immutable", func(s *corev1.Service) { s.Spec.ClusterIP = "10.43.0.11" },
			field.ErrorTypeInvalid, "spec.clusterIP", "field is immutable"},
	})
}

func TestValidateEndpoints(t *testing.T) {
	valid := func() *corev1.Endpoints {
		return defaulted(&corev1.Endpoints{ObjectMeta: objMeta("web"), Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.42.0.5", NodeName: new("node-1")}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080}},
		}}})
	}
	runCreateCases(t, valid, []errCase[*corev1.Endpoints]{
		{"subset needs addresses", func(e *corev1.Endpoints) { e.Subsets[0].Addresses = nil },
			field.ErrorTypeRequired, "subsets[0]", "must specify `addresses` or `notReadyAddresses`"},
		{"address must be an IP", func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].IP = "web-0" },
			field.ErrorTypeInvalid, "subsets[0].addresses[0].ip", "must be a valid IP address"},
		{"address may not be link-local", func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].IP = "169.254.1.1" },
			field.ErrorTypeInvalid, "subsets[0].addresses[0].ip", "link-local"},
		{"port range", func(e *corev1.Endpoints) { e.Subsets[0].Ports[0].Port = 0 }, field.ErrorTypeInvalid, "subsets[0].ports[0].port", ""},
		{"port protocol required", func(e *corev1.Endpoints) { e.Subsets[0].Ports[0].Protocol = "" },
			field.ErrorTypeRequired, "subsets[0].ports[0].protocol", ""},
	})
}

func TestValidateEndpointSlice(t *testing.T) {
	valid := func() *discoveryv1.EndpointSlice {
		return defaulted(&discoveryv1.EndpointSlice{ObjectMeta: objMeta("web-abc"), AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.42.0.5"}, Hostname: new("web-0")}},
			Ports:     []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}}})
	}
	runCreateCases(t, valid, []errCase[*discoveryv1.EndpointSlice]{
		{"address type enum", func(e *discoveryv1.EndpointSlice) { e.AddressType = "IPv5" }, field.ErrorTypeNotSupported, "addressType", ""},
		{"endpoint needs an address", func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses = nil },
			field.ErrorTypeRequired, "endpoints[0].addresses", "must contain at least 1 address"},
		{"IPv4 slice holds IPv4 addresses", func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses = []string{"fd00::5"} },
			field.ErrorTypeInvalid, "endpoints[0].addresses[0]", "must be an IPv4 address"},
		{"port protocol required", func(e *discoveryv1.EndpointSlice) { e.Ports[0].Protocol = nil },
			field.ErrorTypeRequired, "ports[0].protocol", ""},
		{"port names unique", func(e *discoveryv1.EndpointSlice) { e.Ports = append(e.Ports, e.Ports[0]) },
			field.ErrorTypeDuplicate, "ports[1].name", ""},
	})
	runUpdateCases(t, func() *discoveryv1.EndpointSlice { return stored(valid()) }, []updateCase[*discoveryv1.EndpointSlice]{
		{"endpoints may change", func(e *discoveryv1.EndpointSlice) { e.Endpoints[0].Addresses = []string{"10.42.0.6"} }, "", "", ""},
		{"address type is immutable", func(e *discoveryv1.EndpointSlice) {
			e.AddressType = discoveryv1.AddressTypeIPv6
			e.Endpoints[0].Addresses = []string{"fd00::6"}
		}, field.ErrorTypeInvalid, "addressType", "field is immutable"},
	})
}
