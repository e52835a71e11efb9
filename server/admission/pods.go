// Package admission holds the admission plugins the API server runs on every
// write, after defaulting and before validation: the built-in ones a
// Kubernetes user expects (ServiceAccount, Priority, DefaultTolerationSeconds,
// Service IP and node-port allocation).
package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"

	"skiff/server/apiserver"
)

// ObjectGetter reads objects the plugins consult.
type ObjectGetter interface {
	// ServiceAccount returns the named service account, or nil.
	ServiceAccount(ctx context.Context, namespace, name string) *corev1.ServiceAccount
	// PriorityClass returns the named priority class, or nil.
	PriorityClass(ctx context.Context, name string) *schedulingv1.PriorityClass
	// DefaultPriorityClass returns the class marked globalDefault, or nil.
	DefaultPriorityClass(ctx context.Context) *schedulingv1.PriorityClass
}

func newPod(a apiserver.AdmissionAttributes) (*corev1.Pod, bool) {
	if a.Op != apiserver.OpCreate || a.Subresource != "" {
		return nil, false
	}
	pod, ok := a.Object.(*corev1.Pod)
	return pod, ok
}

// ServiceAccount gives pods the namespace's default service account and
// mounts its token, CA and namespace as upstream's ServiceAccount plugin
// does (a projected volume named kube-api-access-<random>).
type ServiceAccount struct{ Get ObjectGetter }

const tokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// Admit implements apiserver.Admitter.
func (p ServiceAccount) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	pod, ok := newPod(a)
	if !ok {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	if isMirrorPod(pod) {
		return nil
	}
	sa := p.Get.ServiceAccount(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if sa == nil {
		return apierrors.NewForbidden(a.Resource.GVR().GroupResource(), pod.Name,
			fmt.Errorf("error looking up service account %s/%s: serviceaccount %q not found", pod.Namespace, pod.Spec.ServiceAccountName, pod.Spec.ServiceAccountName))
	}
	if !automount(pod, sa) {
		return nil
	}
	name := "kube-api-access-" + rand.String(5)
	pod.Spec.Volumes = append(pod.Spec.Volumes, tokenVolume(name))
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: tokenMountPath}
	for i := range pod.Spec.InitContainers {
		addMount(&pod.Spec.InitContainers[i], mount)
	}
	for i := range pod.Spec.Containers {
		addMount(&pod.Spec.Containers[i], mount)
	}
	return nil
}

func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func automount(pod *corev1.Pod, sa *corev1.ServiceAccount) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

func addMount(c *corev1.Container, m corev1.VolumeMount) {
	for _, existing := range c.VolumeMounts {
		if existing.MountPath == tokenMountPath {
			return // the user mounted something there themselves
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, m)
}

func tokenVolume(name string) corev1.Volume {
	expiry, mode := int64(3607), int32(0o644)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}

// Priority resolves a pod's priorityClassName to its priority, as upstream's
// Priority plugin does, with the two built-in system classes.
type Priority struct{ Get ObjectGetter }

// Built-in priority classes, as upstream defines them.
const (
	SystemClusterCritical = "system-cluster-critical"
	SystemNodeCritical    = "system-node-critical"
)

// Admit implements apiserver.Admitter.
func (p Priority) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	pod, ok := newPod(a)
	if !ok {
		return nil
	}
	var value int32
	policy := corev1.PreemptLowerPriority
	switch name := pod.Spec.PriorityClassName; name {
	case SystemClusterCritical:
		value = 2000000000
	case SystemNodeCritical:
		value = 2000001000
	case "":
		if pc := p.Get.DefaultPriorityClass(ctx); pc != nil {
			value, pod.Spec.PriorityClassName = pc.Value, pc.Name
			if pc.PreemptionPolicy != nil {
				policy = *pc.PreemptionPolicy
			}
		}
	default:
		pc := p.Get.PriorityClass(ctx, name)
		if pc == nil {
			return apierrors.NewForbidden(a.Resource.GVR().GroupResource(), pod.Name, fmt.Errorf("no PriorityClass with name %s was found", name))
		}
		value = pc.Value
		if pc.PreemptionPolicy != nil {
			policy = *pc.PreemptionPolicy
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return apierrors.NewForbidden(a.Resource.GVR().GroupResource(), pod.Name, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value))
	}
	pod.Spec.Priority = &value
	if pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = &policy
	}
	return nil
}

// DefaultTolerations adds the not-ready and unreachable NoExecute
// tolerations with a bound (300 s by default) to pods that have none, so a
// failed node's pods move after that time (upstream's
// DefaultTolerationSeconds plugin). It runs on updates too, as upstream's:
// an update that replaces the tolerations keeps the defaults, which pod
// update validation forbids removing.
type DefaultTolerations struct{ Seconds int64 }

// Admit implements apiserver.Admitter.
func (p DefaultTolerations) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if (a.Op != apiserver.OpCreate && a.Op != apiserver.OpUpdate) || a.Subresource != "" {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if tolerates(pod, key) {
			continue
		}
		secs := p.Seconds
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
			Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs,
		})
	}
	return nil
}

func tolerates(pod *corev1.Pod, key string) bool {
	for _, t := range pod.Spec.Tolerations {
		if (t.Key == key || (t.Key == "" && t.Operator == corev1.TolerationOpExists)) &&
			(t.Effect == "" || t.Effect == corev1.TaintEffectNoExecute) {
			return true
		}
	}
	return false
}

func nameOf(obj runtime.Object) string {
	if acc, err := meta.Accessor(obj); err == nil {
		return acc.GetName()
	}
	return ""
}
