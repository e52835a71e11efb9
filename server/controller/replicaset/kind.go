package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// ownerKind is the API kind whose objects the controller keeps supplied
// with pods. The controller's logic reads and writes ReplicaSets; a kind
// that is another shape of the same thing (ReplicationController) is
// converted on the way in and back on the way out, as upstream runs its
// ReplicaSet controller over ReplicationControllers, so that both kinds
// get one implementation of counting, adoption, expectations and status.
//
// Objects returned by get and list come from the informer's cache and
// may share memory with it: the controller never writes to them.
type ownerKind interface {
	// gvk names the kind in the controller references of its pods.
	gvk() schema.GroupVersionKind
	// noun names an object of the kind in logs, errors and the queue.
	noun() string
	informer() cache.SharedIndexInformer
	get(namespace, name string) (*appsv1.ReplicaSet, error)
	list(namespace string) ([]*appsv1.ReplicaSet, error)
	// fetch reads the object from the API server, bypassing the cache.
	fetch(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	// updateStatus writes rs.Status through the status subresource.
	updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// eventObject is what events about rs are recorded on: the object
	// in its own kind, so that `kubectl describe` finds them.
	eventObject(rs *appsv1.ReplicaSet) runtime.Object
	// countsTerminating reports whether the kind's status has
	// terminatingReplicas.
	countsTerminating() bool
}

var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// replicaSets is the kind the controller's logic is written for.
type replicaSets struct {
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	lister appslisters.ReplicaSetLister
}

func newReplicaSets(client kubernetes.Interface, f informers.SharedInformerFactory) ownerKind {
	inf := f.Apps().V1().ReplicaSets()
	return &replicaSets{client: client, inf: inf.Informer(), lister: inf.Lister()}
}

func (k *replicaSets) gvk() schema.GroupVersionKind                     { return controllerKind }
func (k *replicaSets) noun() string                                     { return "replicaset" }
func (k *replicaSets) informer() cache.SharedIndexInformer              { return k.inf }
func (k *replicaSets) eventObject(rs *appsv1.ReplicaSet) runtime.Object { return rs }
func (k *replicaSets) countsTerminating() bool                          { return true }

func (k *replicaSets) get(namespace, name string) (*appsv1.ReplicaSet, error) {
	return k.lister.ReplicaSets(namespace).Get(name)
}

func (k *replicaSets) list(namespace string) ([]*appsv1.ReplicaSet, error) {
	return k.lister.ReplicaSets(namespace).List(labels.Everything())
}

func (k *replicaSets) fetch(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	return k.client.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (k *replicaSets) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	return k.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
}
