package defaults

import (
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// roundResourceList rounds every quantity up to milli precision, as upstream
// does for all resource lists: finer values cannot be represented by the
// runtimes, and rounding up keeps requests from silently shrinking.
func roundResourceList(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(resource.Milli)
		list[name] = q
	}
}

// allPtrFieldsNil reports whether every pointer field of the struct pointed to
// by obj is nil; it tells a volume with no source apart from one with a source.
func allPtrFieldsNil(obj any) bool {
	v := reflect.ValueOf(obj).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			return false
		}
	}
	return true
}

func setService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		cfg := spec.SessionAffinityConfig
		if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if externallyAccessible(spec) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	switch spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if spec.InternalTrafficPolicy == nil {
			spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyCluster)
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts == nil {
			spec.AllocateLoadBalancerNodePorts = new(true)
		}
		for i := range svc.Status.LoadBalancer.Ingress {
			ing := &svc.Status.LoadBalancer.Ingress[i]
			if ing.IP != "" && ing.IPMode == nil {
				ing.IPMode = new(corev1.LoadBalancerIPModeVIP)
			}
		}
	}
}

// externallyAccessible matches upstream's notion of a service reachable from
// outside the cluster, the only kind for which externalTrafficPolicy matters.
func externallyAccessible(spec *corev1.ServiceSpec) bool {
	return spec.Type == corev1.ServiceTypeLoadBalancer ||
		spec.Type == corev1.ServiceTypeNodePort ||
		(spec.Type == corev1.ServiceTypeClusterIP && len(spec.ExternalIPs) > 0)
}

// setNamespace labels the namespace with its own name so that namespace
// selectors can pick it by name.
func setNamespace(ns *corev1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
	// The kubernetes finalizer is added only to namespaces that were never
	// stored (no resourceVersion yet): the namespace controller removes it
	// through the finalize subresource, and putting it back on a later write
	// would block deletion forever.
	if ns.ResourceVersion == "" && !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
}

func setSecret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

func setConfigMap(cm *corev1.ConfigMap) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
}

func setPV(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	spec := &pv.Spec
	if spec.PersistentVolumeReclaimPolicy == "" {
		spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if spec.VolumeMode == nil {
		spec.VolumeMode = new(corev1.PersistentVolumeFilesystem)
	}
	roundResourceList(spec.Capacity)
	setPVSource(&spec.PersistentVolumeSource)
}

// setPVSource fills the declarative defaults of the in-tree plugins, which the
// persistent-volume variants share with the pod volume variants.
func setPVSource(src *corev1.PersistentVolumeSource) {
	if src.HostPath != nil && src.HostPath.Type == nil {
		src.HostPath.Type = new(corev1.HostPathUnset)
	}
	if src.RBD != nil {
		setRBD(&src.RBD.RBDPool, &src.RBD.RadosUser, &src.RBD.Keyring)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	setAzureDisk(src.AzureDisk)
	if src.ScaleIO != nil {
		setScaleIO(&src.ScaleIO.StorageMode, &src.ScaleIO.FSType)
	}
}

func setPVC(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	setPVCSpec(&pvc.Spec)
	roundResourceList(pvc.Status.Capacity)
}

func setPVCSpec(spec *corev1.PersistentVolumeClaimSpec) {
	if spec.VolumeMode == nil {
		spec.VolumeMode = new(corev1.PersistentVolumeFilesystem)
	}
	roundResourceList(spec.Resources.Limits)
	roundResourceList(spec.Resources.Requests)
}

func setEndpoints(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		ports := ep.Subsets[i].Ports
		for j := range ports {
			if ports[j].Protocol == "" {
				ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// setNode makes allocatable explicit for nodes that report only capacity, so
// the scheduler never sees a node with nothing to allocate.
func setNode(node *corev1.Node) {
	syncPodCIDRs(&node.Spec)
	st := &node.Status
	roundResourceList(st.Capacity)
	roundResourceList(st.Allocatable)
	if st.Allocatable == nil && st.Capacity != nil {
		st.Allocatable = st.Capacity.DeepCopy()
	}
}

func setLimitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		for _, l := range []corev1.ResourceList{item.Max, item.Min, item.Default, item.DefaultRequest, item.MaxLimitRequestRatio} {
			roundResourceList(l)
		}
		if item.Type == corev1.LimitTypeContainer {
			setContainerLimitRange(item)
		}
	}
}

// setContainerLimitRange derives the defaults a container receives: the
// default limit falls back to max, and the default request to the default
// limit, then to min.
func setContainerLimitRange(item *corev1.LimitRangeItem) {
	if item.Default == nil {
		item.Default = corev1.ResourceList{}
	}
	if item.DefaultRequest == nil {
		item.DefaultRequest = corev1.ResourceList{}
	}
	fillMissing(item.Default, item.Max)
	fillMissing(item.DefaultRequest, item.Default)
	fillMissing(item.DefaultRequest, item.Min)
}

func fillMissing(dst, src corev1.ResourceList) {
	for name, q := range src {
		if _, ok := dst[name]; !ok {
			dst[name] = q.DeepCopy()
		}
	}
}

func setResourceQuota(rq *corev1.ResourceQuota) {
	roundResourceList(rq.Spec.Hard)
	roundResourceList(rq.Status.Hard)
	roundResourceList(rq.Status.Used)
}

// setReplicationController copies the template labels into an empty selector
// and empty object labels, the pre-apps way of saying "select my own pods".
func setReplicationController(rc *corev1.ReplicationController) {
	if tmpl := rc.Spec.Template; tmpl != nil {
		if tmpl.Labels != nil {
			if len(rc.Spec.Selector) == 0 {
				rc.Spec.Selector = maps.Clone(tmpl.Labels)
			}
			if len(rc.Labels) == 0 {
				rc.Labels = maps.Clone(tmpl.Labels)
			}
		}
		setPodSpec(&tmpl.Spec)
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = new(int32(1))
	}
}
