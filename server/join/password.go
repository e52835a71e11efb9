package join

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// NodePasswordSecretType is the type of node-password Secrets.
	NodePasswordSecretType corev1.SecretType = "skiff.io/node-password"
	nodePasswordSuffix                       = ".node-password.skiff"
	nodePasswordKey                          = "hash"
	// bcrypt reads at most 72 bytes; longer passwords are refused.
	maxPasswordLen = 72
)

// NodePasswordSecretName is the kube-system Secret holding node's password
// hash.
func NodePasswordSecretName(node string) string { return node + nodePasswordSuffix }

// checkNodePassword records password for node on its first join, and on
// later joins refuses any other password: a second machine cannot take an
// existing node's name. Deleting the Secret frees the name.
func (h *Handler) checkNodePassword(ctx context.Context, node, password string) error {
	if password == "" {
		return apierrors.NewBadRequest("join: nodePassword is required")
	}
	if len(password) > maxPasswordLen {
		return apierrors.NewBadRequest(fmt.Sprintf("join: nodePassword is longer than %d bytes", maxPasswordLen))
	}
	secrets := h.cfg.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	name := NodePasswordSecretName(node)
	for attempt := 0; attempt < 2; attempt++ {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if bcrypt.CompareHashAndPassword(s.Data[nodePasswordKey], []byte(password)) != nil {
				return apierrors.NewForbidden(nodeCertsResource, node, fmt.Errorf(
					"node password rejected: node name %s is taken by another machine (delete Secret kube-system/%s to free the name)", node, name))
			}
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("join: read node password of %s: %w", node, err)
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
		if err != nil {
			return fmt.Errorf("join: hash node password: %w", err)
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem,
				Labels: map[string]string{"skiff.io/node": node}},
			Type: NodePasswordSecretType,
			Data: map[string][]byte{nodePasswordKey: hash},
		}, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("join: record node password of %s: %w", node, err)
		}
		// Another join of the same name won the race: compare with it.
	}
	return errors.New("join: node password record keeps changing")
}
