package statefulset

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podEvent records verb on pod in upstream's words, e.g. SuccessfulCreate
// "create Pod web-0 in StatefulSet web successful".
func (c *controller) podEvent(verb string, set *appsv1.StatefulSet, pod *corev1.Pod, err error) {
	title := strings.ToUpper(verb[:1]) + verb[1:]
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "Successful"+title, "%s Pod %s in StatefulSet %s successful", verb, pod.Name, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "Failed"+title, "%s Pod %s in StatefulSet %s failed error: %s", verb, pod.Name, set.Name, err)
}

func (c *controller) claimEvent(verb string, set *appsv1.StatefulSet, pod *corev1.Pod, claim string, err error) {
	title := strings.ToUpper(verb[:1]) + verb[1:]
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "Successful"+title, "%s Claim %s Pod %s in StatefulSet %s success", verb, claim, pod.Name, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "Failed"+title, "%s Claim %s for Pod %s in StatefulSet %s failed error: %s", verb, claim, pod.Name, set.Name, err)
}

// createPod creates pod's claims, then pod.
func (c *controller) createPod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	if err := c.createClaims(ctx, set, pod); err != nil {
		c.podEvent("create", set, pod, err)
		return err
	}
	_, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Usually our own pod that the informer has not shown yet; its
		// event will bring the set back. Anything else blocks the ordinal.
		got, getErr := c.client.CoreV1().Pods(set.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if getErr == nil && metav1.IsControlledBy(got, set) {
			return nil
		}
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	c.podEvent("create", set, pod, err)
	if err != nil {
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	return nil
}

// deletePod deletes pod unless it is already gone (the cache can be behind
// our own deletions).
func (c *controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	err := c.client.CoreV1().Pods(set.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	c.podEvent("delete", set, pod, err)
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	return nil
}

// createClaims creates those of pod's claims that do not exist. A claim
// being deleted is waited for: a pod created now would mount a claim about
// to vanish.
func (c *controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	var errs []error
	for _, claim := range claimsFor(set, ordinalOf(pod)) {
		existing, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(claim.Name)
		switch {
		case apierrors.IsNotFound(err):
			setClaimOwners(set, pod, &claim)
			_, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Create(ctx, &claim, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			c.claimEvent("create", set, pod, claim.Name, err)
			if err != nil {
				errs = append(errs, fmt.Errorf("create claim %s: %w", claim.Name, err))
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("get claim %s: %w", claim.Name, err))
		case existing.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("claim %s is being deleted", claim.Name))
		}
	}
	return errors.Join(errs...)
}

// claimsMatchPolicy says whether pod's existing claims carry the owner
// references the retention policy wants. Missing claims are created
// elsewhere and do not count.
func (c *controller) claimsMatchPolicy(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	for _, want := range claimsFor(set, ordinalOf(pod)) {
		claim, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(want.Name)
		if err == nil && !claimOwnersMatch(set, pod, claim) {
			return false
		}
	}
	return true
}

// fixClaims sets the owner references of pod's claims per the policy.
func (c *controller) fixClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	for _, want := range claimsFor(set, ordinalOf(pod)) {
		claim, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(want.Name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get claim %s: %w", want.Name, err)
		}
		claim = claim.DeepCopy()
		if !setClaimOwners(set, pod, claim) {
			continue
		}
		if _, err := c.client.CoreV1().PersistentVolumeClaims(set.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update owners of claim %s: %w", claim.Name, err)
		}
	}
	return nil
}

// claimIsStale says whether one of pod's claims is still owned by an
// earlier pod of the same name (whenScaled: Delete hands claims to pods).
func (c *controller) claimIsStale(set *appsv1.StatefulSet, pod *corev1.Pod) (bool, error) {
	if retentionPolicy(set).WhenScaled == appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		return false, nil
	}
	for _, want := range claimsFor(set, ordinalOf(pod)) {
		claim, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, err
		case staleOwner(claim, pod):
			return true, nil
		}
	}
	return false, nil
}

// fixPod restores pod's identity labels and claim references (pod is a
// copy). Volumes cannot change on a live pod; a pod missing its claims'
// volumes is left as it is, as upstream's update would be refused.
func (c *controller) fixPod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	if !c.claimsMatchPolicy(set, pod) {
		if err := c.fixClaims(ctx, set, pod); err != nil {
			c.podEvent("update", set, pod, err)
			return err
		}
	}
	if !storageMatches(set, pod) {
		if err := c.createClaims(ctx, set, pod); err != nil {
			c.podEvent("update", set, pod, err)
			return err
		}
	}
	if identityMatches(set, pod) {
		return nil
	}
	for attempt := 0; ; attempt++ {
		before := pod.DeepCopy()
		setIdentity(set, pod)
		if equality.Semantic.DeepEqual(before, pod) {
			return nil
		}
		_, err := c.client.CoreV1().Pods(set.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) || attempt == 5 {
			c.podEvent("update", set, pod, err)
			if err != nil {
				return fmt.Errorf("update pod %s: %w", pod.Name, err)
			}
			return nil
		}
		fresh, err := c.client.CoreV1().Pods(set.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get pod %s: %w", pod.Name, err)
		}
		pod = fresh
	}
}
