package serviceaccount

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	listers "k8s.io/client-go/listers/core/v1"
)

type reconciler struct {
	cfg Config
	ns  listers.NamespaceLister
	sa  listers.ServiceAccountLister
	cm  listers.ConfigMapLister
}

// sync makes sure one namespace has its default service account and root
// CA config map. Terminating namespaces are left alone: they are emptying.
func (r *reconciler) sync(ctx context.Context, namespace string) error {
	ns, err := r.ns.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return nil
	}
	if _, err := r.sa.ServiceAccounts(namespace).Get("default"); apierrors.IsNotFound(err) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: namespace}}
		if _, err := r.cfg.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create default service account: %w", err)
		}
	}
	return r.syncRootCA(ctx, namespace)
}

func (r *reconciler) syncRootCA(ctx context.Context, namespace string) error {
	want := map[string]string{"ca.crt": string(r.cfg.CACert)}
	cm, err := r.cm.ConfigMaps(namespace).Get(RootCAConfigMap)
	switch {
	case apierrors.IsNotFound(err):
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: RootCAConfigMap, Namespace: namespace,
				Annotations: map[string]string{"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
			Data: want,
		}
		if _, err := r.cfg.Client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", RootCAConfigMap, err)
		}
		return nil
	case err != nil:
		return err
	case bytes.Equal([]byte(cm.Data["ca.crt"]), r.cfg.CACert) && len(cm.Data) == 1:
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = want
	if _, err := r.cfg.Client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update %s: %w", RootCAConfigMap, err)
	}
	return nil
}
