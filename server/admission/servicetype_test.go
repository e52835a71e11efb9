package admission

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The type changes of the upstream conformance tests, made as the e2e jig
// makes them: read the Service, change the type (and what the test
// changes), write it back.
func TestServiceUpdate_TypeChange_ClearsOrAllocatesTypeDependentFields(t *testing.T) {
	toExternalName := func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "foo.example.com"
		s.Spec.Ports[0].NodePort = 0
	}
	leaveExternalName := func(typ corev1.ServiceType) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = typ, ""
			s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
		}
	}
	cases := []struct {
		name     string
		from     corev1.ServiceType
		change   func(*corev1.Service)
		wantIP   bool
		wantNode bool
	}{
		{"ClusterIP to ExternalName", corev1.ServiceTypeClusterIP, toExternalName, false, false},
		{"NodePort to ExternalName", corev1.ServiceTypeNodePort, toExternalName, false, false},
		{"LoadBalancer to ExternalName", corev1.ServiceTypeLoadBalancer, toExternalName, false, false},
		{"ExternalName to ClusterIP", corev1.ServiceTypeExternalName, leaveExternalName(corev1.ServiceTypeClusterIP), true, false},
		{"ExternalName to NodePort", corev1.ServiceTypeExternalName, leaveExternalName(corev1.ServiceTypeNodePort), true, true},
		{"NodePort to ClusterIP", corev1.ServiceTypeNodePort, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }, true, false},
		{"LoadBalancer to ClusterIP", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }, true, false},
		{"ClusterIP to NodePort", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := startAPI(t, "10.43.0.0/16")
			ctx := context.Background()
			s := apiService("svc", c.from)
			if c.from == corev1.ServiceTypeExternalName {
				s.Spec.ExternalName, s.Spec.Ports = "foo.example.com", nil
			}
			created := e.createService(t, s)
			oldPorts := e.nodePortKeys(t, created)
			c.change(created)
			got, err := e.client.CoreV1().Services("default").Update(ctx, created, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if ip := got.Spec.ClusterIP; c.wantIP != (ip != "") || c.wantIP != (len(got.Spec.ClusterIPs) == 1 && got.Spec.ClusterIPs[0] == ip) {
				t.Errorf("clusterIP %q clusterIPs %v, want an address: %v", ip, got.Spec.ClusterIPs, c.wantIP)
			}
			if c.wantIP {
				if _, ok := e.ipAddress(t, got.Spec.ClusterIP); !ok {
					t.Errorf("no IPAddress for %s", got.Spec.ClusterIP)
				}
				if len(got.Spec.IPFamilies) != 1 || got.Spec.IPFamilyPolicy == nil {
					t.Errorf("ipFamilies %v ipFamilyPolicy %v, want them set", got.Spec.IPFamilies, got.Spec.IPFamilyPolicy)
				}
			} else if len(got.Spec.IPFamilies) != 0 || got.Spec.IPFamilyPolicy != nil || got.Spec.ExternalTrafficPolicy != "" {
				t.Errorf("ExternalName kept ipFamilies %v, ipFamilyPolicy %v, externalTrafficPolicy %q", got.Spec.IPFamilies, got.Spec.IPFamilyPolicy, got.Spec.ExternalTrafficPolicy)
			}
			if created.Spec.ClusterIP != "" && created.Spec.ClusterIP != got.Spec.ClusterIP {
				if _, ok := e.ipAddress(t, created.Spec.ClusterIP); ok {
					t.Errorf("the old address %s was not released", created.Spec.ClusterIP)
				}
			}
			if hasNode := got.Spec.Ports[0].NodePort != 0; hasNode != c.wantNode {
				t.Errorf("nodePort %d, want one: %v", got.Spec.Ports[0].NodePort, c.wantNode)
			}
			if !c.wantNode {
				for _, key := range oldPorts {
					if _, err := e.srv.Store.Get(ctx, key); err == nil {
						t.Errorf("node port %s not released", key)
					}
				}
			}
		})
	}
}

func (e *apiEnv) nodePortKeys(t *testing.T, s *corev1.Service) []string {
	t.Helper()
	var keys []string
	for _, p := range s.Spec.Ports {
		if p.NodePort != 0 {
			keys = append(keys, portPrefix+strconv.Itoa(int(p.NodePort)))
		}
	}
	if s.Spec.HealthCheckNodePort != 0 {
		keys = append(keys, portPrefix+strconv.Itoa(int(s.Spec.HealthCheckNodePort)))
	}
	return keys
}

func TestDropTypeDependentFields_ClientChangedField_IsKeptForValidation(t *testing.T) {
	old := apiService("svc", corev1.ServiceTypeClusterIP)
	old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.43.0.9", []string{"10.43.0.9"}
	old.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	cur := old.DeepCopy()
	cur.Spec.Type, cur.Spec.ExternalName = corev1.ServiceTypeExternalName, "foo.example.com"
	cur.Spec.ClusterIP, cur.Spec.ClusterIPs = "10.43.0.10", []string{"10.43.0.10"}
	dropTypeDependentFields(cur, old)
	if cur.Spec.ClusterIP != "10.43.0.10" {
		t.Errorf("a clusterIP the client changed was dropped: %q", cur.Spec.ClusterIP)
	}
	if len(cur.Spec.IPFamilies) != 0 {
		t.Errorf("unchanged ipFamilies kept: %v", cur.Spec.IPFamilies)
	}
}
