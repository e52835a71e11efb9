package node

import corev1 "k8s.io/api/core/v1"

// RefKind is what a pod may reference by name.
type RefKind string

// The kinds VisitReferences reports.
const (
	RefSecret    RefKind = "secret"
	RefConfigMap RefKind = "configmap"
	RefPVC       RefKind = "persistentvolumeclaim"
)

func kindOf(resource string) RefKind {
	switch resource {
	case "secrets":
		return RefSecret
	case "configmaps":
		return RefConfigMap
	}
	return RefPVC
}

// podReferences reports whether pod uses the object of kind named name:
// through volumes (also projected ones and volume plugins' secret refs),
// env, envFrom or imagePullSecrets.
func podReferences(pod *corev1.Pod, kind RefKind, name string) bool {
	found := false
	VisitReferences(pod, func(k RefKind, n string) {
		found = found || (k == kind && n == name)
	})
	return found
}

// VisitReferences calls fn for every object pod references by name:
// Secrets, ConfigMaps and PersistentVolumeClaims.
func VisitReferences(pod *corev1.Pod, fn func(RefKind, string)) {
	for _, s := range pod.Spec.ImagePullSecrets {
		fn(RefSecret, s.Name)
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Ephemeral != nil {
			// A generic ephemeral volume's claim is named <pod>-<volume>.
			fn(RefPVC, pod.Name+"-"+v.Name)
		}
		visitVolume(&v.VolumeSource, fn)
	}
	visitContainers := func(envs [][]corev1.EnvVar, froms [][]corev1.EnvFromSource) {
		for _, env := range envs {
			for _, e := range env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					fn(RefSecret, r.Name)
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					fn(RefConfigMap, r.Name)
				}
			}
		}
		for _, from := range froms {
			for _, f := range from {
				if f.SecretRef != nil {
					fn(RefSecret, f.SecretRef.Name)
				}
				if f.ConfigMapRef != nil {
					fn(RefConfigMap, f.ConfigMapRef.Name)
				}
			}
		}
	}
	var envs [][]corev1.EnvVar
	var froms [][]corev1.EnvFromSource
	for _, c := range pod.Spec.InitContainers {
		envs, froms = append(envs, c.Env), append(froms, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		envs, froms = append(envs, c.Env), append(froms, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		envs, froms = append(envs, c.Env), append(froms, c.EnvFrom)
	}
	visitContainers(envs, froms)
}

func visitVolume(v *corev1.VolumeSource, fn func(RefKind, string)) {
	switch {
	case v.Secret != nil:
		fn(RefSecret, v.Secret.SecretName)
	case v.ConfigMap != nil:
		fn(RefConfigMap, v.ConfigMap.Name)
	case v.PersistentVolumeClaim != nil:
		fn(RefPVC, v.PersistentVolumeClaim.ClaimName)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				fn(RefSecret, s.Secret.Name)
			}
			if s.ConfigMap != nil {
				fn(RefConfigMap, s.ConfigMap.Name)
			}
		}
	case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
		fn(RefSecret, v.CSI.NodePublishSecretRef.Name)
	case v.AzureFile != nil:
		fn(RefSecret, v.AzureFile.SecretName)
	case v.CephFS != nil && v.CephFS.SecretRef != nil:
		fn(RefSecret, v.CephFS.SecretRef.Name)
	case v.RBD != nil && v.RBD.SecretRef != nil:
		fn(RefSecret, v.RBD.SecretRef.Name)
	case v.ISCSI != nil && v.ISCSI.SecretRef != nil:
		fn(RefSecret, v.ISCSI.SecretRef.Name)
	case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil:
		fn(RefSecret, v.FlexVolume.SecretRef.Name)
	}
}
