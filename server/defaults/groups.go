package defaults

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func setNetworkPolicy(np *networkingv1.NetworkPolicy) {
	// A policy without policyTypes always isolates ingress, and isolates
	// egress only when it has egress rules.
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) != 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	for i := range np.Spec.Ingress {
		setNetworkPolicyPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		setNetworkPolicyPorts(np.Spec.Egress[i].Ports)
	}
}

func setNetworkPolicyPorts(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		if ports[i].Protocol == nil {
			ports[i].Protocol = new(corev1.ProtocolTCP)
		}
	}
}

func setIngressClass(ic *networkingv1.IngressClass) {
	if p := ic.Spec.Parameters; p != nil && p.Scope == nil {
		p.Scope = new(networkingv1.IngressClassParametersReferenceScopeCluster)
	}
}

func setStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = new(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = new(storagev1.VolumeBindingImmediate)
	}
}

func setCSIDriver(d *storagev1.CSIDriver) {
	spec := &d.Spec
	if spec.AttachRequired == nil {
		spec.AttachRequired = new(true)
	}
	if spec.PodInfoOnMount == nil {
		spec.PodInfoOnMount = new(false)
	}
	if spec.StorageCapacity == nil {
		spec.StorageCapacity = new(false)
	}
	if spec.FSGroupPolicy == nil {
		spec.FSGroupPolicy = new(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	}
	if len(spec.VolumeLifecycleModes) == 0 {
		spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if spec.RequiresRepublish == nil {
		spec.RequiresRepublish = new(false)
	}
}

func setVolumeAttachment(va *storagev1.VolumeAttachment) {
	if spec := va.Spec.Source.InlineVolumeSpec; spec != nil {
		if spec.PersistentVolumeReclaimPolicy == "" {
			spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		}
		if spec.VolumeMode == nil {
			spec.VolumeMode = new(corev1.PersistentVolumeFilesystem)
		}
		roundResourceList(spec.Capacity)
		setPVSource(&spec.PersistentVolumeSource)
	}
}

func setRoleRef(ref *rbacv1.RoleRef) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
}

// setSubjects gives users and groups the RBAC API group; service accounts
// live in the core group, which is the empty string.
func setSubjects(subjects []rbacv1.Subject) {
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

func setPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		pc.PreemptionPolicy = new(corev1.PreemptLowerPriority)
	}
}

func setEndpointSlice(es *discoveryv1.EndpointSlice) {
	for i := range es.Ports {
		p := &es.Ports[i]
		if p.Name == nil {
			p.Name = new("")
		}
		if p.Protocol == nil {
			p.Protocol = new(corev1.ProtocolTCP)
		}
	}
}

func setCSR(csr *certificatesv1.CertificateSigningRequest) {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Status == "" {
			csr.Status.Conditions[i].Status = corev1.ConditionTrue
		}
	}
}
