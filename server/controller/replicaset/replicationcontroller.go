package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// RunReplicationControllers keeps core/v1 ReplicationControllers supplied
// with pods until ctx ends (upstream's replication manager). A
// ReplicationController is a ReplicaSet with an equality-only selector and
// no terminatingReplicas: the same controller runs over it, converting each
// object to a ReplicaSet as it reads it and back as it writes status or
// records events, so the pods it creates are controlled by the
// ReplicationController and the garbage collector deletes or orphans them
// with it.
func RunReplicationControllers(ctx context.Context, cfg Config) error {
	return run(ctx, cfg, newReplicationControllers)
}

var rcKind = corev1.SchemeGroupVersion.WithKind("ReplicationController")

type replicationControllers struct {
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	lister corelisters.ReplicationControllerLister
}

func newReplicationControllers(client kubernetes.Interface, f informers.SharedInformerFactory) ownerKind {
	inf := f.Core().V1().ReplicationControllers()
	return &replicationControllers{client: client, inf: inf.Informer(), lister: inf.Lister()}
}

func (k *replicationControllers) gvk() schema.GroupVersionKind        { return rcKind }
func (k *replicationControllers) noun() string                        { return "replicationcontroller" }
func (k *replicationControllers) informer() cache.SharedIndexInformer { return k.inf }
func (k *replicationControllers) countsTerminating() bool             { return false }

func (k *replicationControllers) eventObject(rs *appsv1.ReplicaSet) runtime.Object {
	return replicationControllerOf(rs)
}

func (k *replicationControllers) get(namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := k.lister.ReplicationControllers(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return replicaSetOf(rc), nil
}

func (k *replicationControllers) list(namespace string) ([]*appsv1.ReplicaSet, error) {
	rcs, err := k.lister.ReplicationControllers(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.ReplicaSet, len(rcs))
	for i, rc := range rcs {
		out[i] = replicaSetOf(rc)
	}
	return out, nil
}

func (k *replicationControllers) fetch(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := k.client.CoreV1().ReplicationControllers(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return replicaSetOf(rc), nil
}

func (k *replicationControllers) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	rc, err := k.client.CoreV1().ReplicationControllers(rs.Namespace).UpdateStatus(ctx, replicationControllerOf(rs), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return replicaSetOf(rc), nil
}

// replicaSetOf is the ReplicaSet a ReplicationController amounts to. It
// is shallow: metadata, the selector's map and the template share memory
// with rc, which comes from the cache and is only read. Converting back
// with replicationControllerOf gives the same object, so a status
// computed from the converse is compared field for field.
func replicaSetOf(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
			Selector:        &metav1.LabelSelector{MatchLabels: rc.Spec.Selector},
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

// replicationControllerOf converts back what replicaSetOf made, with the
// status the controller computed. terminatingReplicas has no place in a
// ReplicationController and is dropped.
func replicationControllerOf(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	rc := &corev1.ReplicationController{
		ObjectMeta: rs.ObjectMeta,
		Spec: corev1.ReplicationControllerSpec{
			Replicas:        rs.Spec.Replicas,
			MinReadySeconds: rs.Spec.MinReadySeconds,
			Template:        &rs.Spec.Template,
		},
		Status: corev1.ReplicationControllerStatus{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rc
}
