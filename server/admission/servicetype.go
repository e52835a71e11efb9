package admission

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// dropTypeDependentFields clears, on an update that changes a Service's
// type, what the old type needed and the new one may not have, as
// upstream's update strategy does: the allocator and defaulting filled
// those in, so a client that only changed the type cannot be expected to
// clear them. A field the client changed along with the type is kept, for
// validation to judge. What is cleared is released after the write.
func dropTypeDependentFields(svc, old *corev1.Service) {
	if old == nil {
		return
	}
	if needsClusterIP(old) && !needsClusterIP(svc) {
		if svc.Spec.ClusterIP == old.Spec.ClusterIP && slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) {
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		}
		if slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies) {
			svc.Spec.IPFamilies = nil
		}
		if policyOf(svc) == policyOf(old) {
			svc.Spec.IPFamilyPolicy = nil
		}
	}
	if needsNodePorts(old.Spec.Type) && !needsNodePorts(svc.Spec.Type) && noNewNodePorts(svc, old) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	if needsHealthCheck(old) && !needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	wasLB, isLB := old.Spec.Type == corev1.ServiceTypeLoadBalancer, svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if wasLB && !isLB {
		if a, b := svc.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts; a != nil && b != nil && *a == *b {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if a, b := svc.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass; a == nil && b == nil || a != nil && b != nil && *a == *b {
			svc.Spec.LoadBalancerClass = nil
		}
	}
	if externallyAccessible(old) && !externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	if !isLB {
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
}

func needsClusterIP(svc *corev1.Service) bool { return svc.Spec.Type != corev1.ServiceTypeExternalName }

func policyOf(svc *corev1.Service) corev1.IPFamilyPolicy {
	if svc.Spec.IPFamilyPolicy == nil {
		return ""
	}
	return *svc.Spec.IPFamilyPolicy
}

// noNewNodePorts: ports may be added, removed or changed along with the
// type as long as no node port appears that the old Service did not have.
func noNewNodePorts(svc, old *corev1.Service) bool {
	had := map[int32]bool{}
	for _, p := range old.Spec.Ports {
		had[p.NodePort] = true
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !had[p.NodePort] {
			return false
		}
	}
	return true
}

// externallyAccessible: only these Services have an external traffic
// policy.
func externallyAccessible(svc *corev1.Service) bool {
	t := svc.Spec.Type
	return t == corev1.ServiceTypeLoadBalancer || t == corev1.ServiceTypeNodePort ||
		t == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0
}
