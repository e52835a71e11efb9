package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var serviceCountName = CountName(schema.GroupResource{Resource: "services"})

var serviceResources = []corev1.ResourceName{
	serviceCountName,
	corev1.ResourceServices,
	corev1.ResourceServicesNodePorts,
	corev1.ResourceServicesLoadBalancers,
}

type serviceEvaluator struct{}

func (serviceEvaluator) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "services"}
}

// Handles creates and updates: an update can change the type, and with it
// node ports and load balancers.
func (serviceEvaluator) Handles(op Operation, subresource string, _, _ runtime.Object) bool {
	return subresource == "" && (op == Create || op == Update)
}

func (serviceEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	return Intersection(names, serviceResources)
}

func (serviceEvaluator) MatchesScope(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

func (serviceEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Usage: one service; a NodePort or LoadBalancer service one node port per
// port (an LB without node port allocation only the ports that name one:
// they are not allocated yet at admission, so intent is counted), and an
// LB one load balancer.
func (serviceEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("expect *v1.Service, got %T", obj)
	}
	ports := int64(len(svc.Spec.Ports))
	out := corev1.ResourceList{
		serviceCountName:                     one.DeepCopy(),
		corev1.ResourceServices:              one.DeepCopy(),
		corev1.ResourceServicesLoadBalancers: resource.Quantity{Format: resource.DecimalSI},
		corev1.ResourceServicesNodePorts:     resource.Quantity{Format: resource.DecimalSI},
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
	case corev1.ServiceTypeLoadBalancer:
		if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
			var n int64
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					n++
				}
			}
			ports = n
		}
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
		out[corev1.ResourceServicesLoadBalancers] = one.DeepCopy()
	}
	return out, nil
}
