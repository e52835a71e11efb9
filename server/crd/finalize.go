package crd

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PrepareDelete is the CRD row's BeforeDelete: a CRD is not deleted at
// once but marked Terminating with the cleanup finalizer, which the
// manager removes once every object of the CRD is gone (upstream's CRD
// REST Delete).
func PrepareDelete(obj runtime.Object) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return
	}
	if !slices.Contains(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
	}
	if crd.DeletionTimestamp == nil {
		setCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionPending",
			Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"})
	}
}

// finalize deletes the objects of a CRD being deleted, then its rows, then
// lets the CRD go by removing the cleanup finalizer.
func (m *Manager) finalize(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	if !slices.Contains(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer) {
		return nil
	}
	want := crd.DeepCopy()
	remaining, delErr := 0, error(nil)
	if isTrue(crd, apiextensionsv1.Established) {
		remaining, delErr = m.deleteObjects(ctx, crd)
	}
	switch {
	case delErr != nil:
		setCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not issue all deletes: %v", delErr)})
	case remaining > 0:
		setCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress"})
	default:
		setCondition(want, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"})
	}
	if remaining > 0 || delErr != nil {
		if c := condition(crd, apiextensionsv1.Terminating); c == nil || c.Reason != condition(want, apiextensionsv1.Terminating).Reason {
			if err := m.updateStatus(ctx, want); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		m.queue.AddAfter(crd.Name, retryAfter)
		return nil
	}
	if err := m.updateStatus(ctx, want); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.unserve(crd.Name)
	m.publish()
	return m.removeFinalizer(ctx, crd.Name)
}

// deleteObjects deletes every object of the CRD (all namespaces) and says
// how many were still there.
func (m *Manager) deleteObjects(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (int, error) {
	m.mu.Lock()
	rows := m.served[crd.Name]
	m.mu.Unlock()
	if len(rows) == 0 {
		return 0, nil
	}
	gvr := rows[0].GVR()
	list, err := m.cfg.Client.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	var firstErr error
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() != nil {
			continue
		}
		var ri = m.cfg.Client.Resource(gvr)
		var err error
		if ns := item.GetNamespace(); ns != "" {
			err = ri.Namespace(ns).Delete(ctx, item.GetName(), metav1.DeleteOptions{})
		} else {
			err = ri.Delete(ctx, item.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) && firstErr == nil {
			firstErr = err
		}
	}
	return len(list.Items), firstErr
}

func (m *Manager) removeFinalizer(ctx context.Context, name string) error {
	ri := m.cfg.Client.Resource(GVR)
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	fins := slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == apiextensionsv1.CustomResourceCleanupFinalizer })
	u.SetFinalizers(fins)
	_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
