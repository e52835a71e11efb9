package podsecurity

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// exemptWindows allows pods with spec.os.name windows (from v1.25): API
// validation already refuses the Linux-only fields on them.
func exemptWindows(fn checkFn) checkFn {
	return func(meta *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
		if spec.OS != nil && spec.OS.Name == corev1.Windows {
			return allowed
		}
		return fn(meta, spec)
	}
}

func allowPrivilegeEscalation(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var bad []string
	visitContainers(spec, func(c *corev1.Container) {
		if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			bad = append(bad, c.Name)
		}
	})
	if len(bad) == 0 {
		return allowed
	}
	return Result{Reason: "allowPrivilegeEscalation != false", Detail: containers(bad) + " must set securityContext.allowPrivilegeEscalation=false"}
}

func capabilitiesRestricted(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var missingDrop, adding []string
	caps := sets.New[string]()
	visitContainers(spec, func(c *corev1.Container) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			missingDrop = append(missingDrop, c.Name)
			return
		}
		dropsAll := false
		for _, cap := range c.SecurityContext.Capabilities.Drop {
			if cap == "ALL" {
				dropsAll = true
				break
			}
		}
		if !dropsAll {
			missingDrop = append(missingDrop, c.Name)
		}
		add := false
		for _, cap := range c.SecurityContext.Capabilities.Add {
			if cap != "NET_BIND_SERVICE" {
				add = true
				caps.Insert(string(cap))
			}
		}
		if add {
			adding = append(adding, c.Name)
		}
	})
	var details []string
	if len(missingDrop) > 0 {
		details = append(details, containers(missingDrop)+` must set securityContext.capabilities.drop=["ALL"]`)
	}
	if len(adding) > 0 {
		details = append(details, fmt.Sprintf("%s must not include %s in securityContext.capabilities.add", containers(adding), joinQuote(sets.List(caps))))
	}
	if len(details) == 0 {
		return allowed
	}
	return Result{Reason: "unrestricted capabilities", Detail: strings.Join(details, "; ")}
}

// restrictedVolumeType names the first volume source a volume uses among
// those restricted forbids, as upstream orders them.
func restrictedVolumeType(v *corev1.Volume) string {
	for _, t := range []struct {
		set  bool
		name string
	}{
		{v.HostPath != nil, "hostPath"},
		{v.GCEPersistentDisk != nil, "gcePersistentDisk"},
		{v.AWSElasticBlockStore != nil, "awsElasticBlockStore"},
		{v.GitRepo != nil, "gitRepo"},
		{v.NFS != nil, "nfs"},
		{v.ISCSI != nil, "iscsi"},
		{v.Glusterfs != nil, "glusterfs"},
		{v.RBD != nil, "rbd"},
		{v.FlexVolume != nil, "flexVolume"},
		{v.Cinder != nil, "cinder"},
		{v.CephFS != nil, "cephfs"},
		{v.Flocker != nil, "flocker"},
		{v.FC != nil, "fc"},
		{v.AzureFile != nil, "azureFile"},
		{v.VsphereVolume != nil, "vsphereVolume"},
		{v.Quobyte != nil, "quobyte"},
		{v.AzureDisk != nil, "azureDisk"},
		{v.PhotonPersistentDisk != nil, "photonPersistentDisk"},
		{v.PortworxVolume != nil, "portworxVolume"},
		{v.ScaleIO != nil, "scaleIO"},
		{v.StorageOS != nil, "storageos"},
	} {
		if t.set {
			return t.name
		}
	}
	return "unknown"
}

func restrictedVolumes(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var bad []string
	types := sets.New[string]()
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.ConfigMap != nil || v.CSI != nil || v.DownwardAPI != nil || v.EmptyDir != nil || v.Ephemeral != nil ||
			v.Image != nil || v.PersistentVolumeClaim != nil || v.Projected != nil || v.Secret != nil {
			continue
		}
		bad = append(bad, v.Name)
		types.Insert(restrictedVolumeType(v))
	}
	if len(bad) == 0 {
		return allowed
	}
	return Result{Reason: "restricted volume types", Detail: fmt.Sprintf("%s %s %s %s %s",
		pluralize("volume", "volumes", len(bad)), joinQuote(bad), pluralize("uses", "use", len(bad)),
		pluralize("restricted volume type", "restricted volume types", types.Len()), joinQuote(sets.List(types)))}
}

func runAsNonRoot(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var setters []string
	podNonRoot := false
	if sc := spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		if *sc.RunAsNonRoot {
			podNonRoot = true
		} else {
			setters = append(setters, "pod")
		}
	}
	var explicit, implicit []string
	visitContainers(spec, func(c *corev1.Container) {
		switch sc := c.SecurityContext; {
		case sc != nil && sc.RunAsNonRoot != nil:
			if !*sc.RunAsNonRoot {
				explicit = append(explicit, c.Name)
			}
		case !podNonRoot:
			implicit = append(implicit, c.Name)
		}
	})
	if len(explicit) > 0 {
		setters = append(setters, containers(explicit))
	}
	if len(setters) > 0 {
		return Result{Reason: "runAsNonRoot != true", Detail: strings.Join(setters, " and ") + " must not set securityContext.runAsNonRoot=false"}
	}
	if len(implicit) > 0 {
		return Result{Reason: "runAsNonRoot != true", Detail: "pod or " + containers(implicit) + " must set securityContext.runAsNonRoot=true"}
	}
	return allowed
}

func runAsUser(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	var setters []string
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		setters = append(setters, "pod")
	}
	var bad []string
	visitContainers(spec, func(c *corev1.Container) {
		if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			bad = append(bad, c.Name)
		}
	})
	if len(bad) > 0 {
		setters = append(setters, containers(bad))
	}
	if len(setters) == 0 {
		return allowed
	}
	return Result{Reason: "runAsUser=0", Detail: strings.Join(setters, " and ") + " must not set runAsUser=0"}
}

func seccompRestricted(_ *metav1.ObjectMeta, spec *corev1.PodSpec) Result {
	setters, values, unset, podValid := seccompSetters(spec)
	if len(setters) > 0 {
		return Result{Reason: "seccompProfile", Detail: fmt.Sprintf("%s must not set securityContext.seccompProfile.type to %s",
			strings.Join(setters, " and "), joinQuote(values))}
	}
	if len(unset) > 0 && !podValid {
		return Result{Reason: "seccompProfile", Detail: fmt.Sprintf(`pod or %s must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
			containers(unset))}
	}
	return allowed
}
