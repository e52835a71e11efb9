package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/auth/node"
)

// SignerAuthorizer answers whether a user may act for a signer.
type SignerAuthorizer interface {
	Authorize(ctx context.Context, a auth.Attributes) (allowed bool, reason string, err error)
}

// PodCertificateLookups reads what a kubelet's PodCertificateRequest is
// checked against; nil objects mean "does not exist".
type PodCertificateLookups interface {
	ServiceAccount(ctx context.Context, namespace, name string) *corev1.ServiceAccount
	CertificateNode(ctx context.Context, name string) (*corev1.Node, error)
	CertificatePod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	CertificateSync(ctx context.Context) error
}

// Certificates enforces who may speak for a signer, as upstream's
// ClusterTrustBundleAttest plugin and PodCertificateRequest status
// strategy do: a ClusterTrustBundle naming a signer needs "attest" on
// signers/<signer> (or <domain>/*), and changing a PodCertificateRequest's
// status needs "sign". It also applies NodeRestriction's rules for
// PodCertificateRequests: a kubelet asks only for pods bound to itself,
// with their real pod, node and service-account identities.
type Certificates struct {
	Authorizer SignerAuthorizer
	Get        PodCertificateLookups
}

// Admit implements apiserver.Admitter.
func (p Certificates) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Resource == nil || a.Resource.Group != certificatesv1.GroupName || a.Op == apiserver.OpDelete {
		return nil
	}
	gr := a.Resource.GVR().GroupResource()
	switch o := a.Object.(type) {
	case *certificatesv1.ClusterTrustBundle:
		if o.Spec.SignerName == "" {
			return nil
		}
		if old, ok := a.Old.(*certificatesv1.ClusterTrustBundle); ok && equality.Semantic.DeepEqual(old.Spec, o.Spec) && sameLabels(old.Labels, o.Labels) {
			return nil // metadata only (finalizers, owners): not a new attestation
		}
		return p.requireSigner(ctx, a, "attest", o.Spec.SignerName, "attest for")
	case *certificatesv1.PodCertificateRequest:
		if me, ok := node.NodeName(a.User); ok && a.Op == apiserver.OpCreate {
			if err := p.admitNodeRequest(ctx, me, o); err != nil {
				return apierrors.NewForbidden(gr, o.Name, err)
			}
		}
		old, ok := a.Old.(*certificatesv1.PodCertificateRequest)
		if !ok || a.Op != apiserver.OpUpdate || equality.Semantic.DeepEqual(old.Status, o.Status) {
			return nil
		}
		return p.requireSigner(ctx, a, "sign", old.Spec.SignerName, `"sign" for`)
	}
	return nil
}

func sameLabels(a, b map[string]string) bool { return equality.Semantic.DeepEqual(a, b) }

// requireSigner asks for verb on the signer, then on its domain's
// wildcard, as upstream's IsAuthorizedForSignerName.
func (p Certificates) requireSigner(ctx context.Context, a apiserver.AdmissionAttributes, verb, signer, what string) error {
	domain, _, _ := strings.Cut(signer, "/")
	for _, name := range []string{signer, domain + "/*"} {
		ok, _, err := p.Authorizer.Authorize(ctx, auth.Attributes{User: a.User, Verb: verb, ResourceRequest: true,
			APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers", Name: name})
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("authorize %s on signer %q: %w", verb, signer, err))
		}
		if ok {
			return nil
		}
	}
	user := ""
	if a.User != nil {
		user = a.User.Name
	}
	return apierrors.NewForbidden(a.Resource.GVR().GroupResource(), nameOf(a.Object),
		fmt.Errorf("user %q is not permitted to %s signer %q", user, what, signer))
}

// errRetry marks refusals the watch cache's lag may cause.
var errRetry = errors.New("not yet visible")

// admitNodeRequest checks a kubelet's request against the pod, node and
// service account it names.
func (p Certificates) admitNodeRequest(ctx context.Context, me string, r *certificatesv1.PodCertificateRequest) error {
	err := p.checkNodeRequest(ctx, me, r)
	if errors.Is(err, errRetry) {
		if serr := p.Get.CertificateSync(ctx); serr != nil {
			return fmt.Errorf("%w (%w)", err, serr)
		}
		err = p.checkNodeRequest(ctx, me, r)
	}
	return err
}

func (p Certificates) checkNodeRequest(ctx context.Context, me string, r *certificatesv1.PodCertificateRequest) error {
	if string(r.Spec.NodeName) != me {
		return fmt.Errorf("PodCertificateRequest.Spec.NodeName=%q, which is not the requesting node %q", r.Spec.NodeName, me)
	}
	n, err := p.Get.CertificateNode(ctx, me)
	if err != nil {
		return err
	}
	if n == nil || n.UID != r.Spec.NodeUID {
		return fmt.Errorf("%w: PodCertificateRequest names node UID %q, inconsistent with the running node", errRetry, r.Spec.NodeUID)
	}
	key := r.Namespace + "/" + r.Spec.PodName
	pod, err := p.Get.CertificatePod(ctx, r.Namespace, r.Spec.PodName)
	if err != nil {
		return err
	}
	if pod == nil || pod.UID != r.Spec.PodUID {
		return fmt.Errorf("%w: PodCertificateRequest for pod %q contains a pod UID %q that differs from the running pod", errRetry, key, r.Spec.PodUID)
	}
	if pod.Spec.NodeName != me {
		return fmt.Errorf("pod %q is not running on node %q named in the PodCertificateRequest", key, me)
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return fmt.Errorf("pod %q is a mirror pod", key)
	}
	if r.Spec.ServiceAccountName != pod.Spec.ServiceAccountName {
		return fmt.Errorf("PodCertificateRequest for pod %q contains serviceAccountName (%q) that differs from running pod (%q)", key, r.Spec.ServiceAccountName, pod.Spec.ServiceAccountName)
	}
	sa := p.Get.ServiceAccount(ctx, r.Namespace, r.Spec.ServiceAccountName)
	if sa == nil || sa.UID != r.Spec.ServiceAccountUID {
		return fmt.Errorf("%w: PodCertificateRequest for pod %q names service account UID %q, which differs from the running service account", errRetry, key, r.Spec.ServiceAccountUID)
	}
	if !podUsesSigner(pod, r.Spec.SignerName) {
		return fmt.Errorf("pod %q has no podCertificate volume for signer %q", key, r.Spec.SignerName)
	}
	return nil
}

// podUsesSigner: a kubelet has a reason to ask a signer only for a pod
// that projects one of its certificates.
func podUsesSigner(pod *corev1.Pod, signer string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.PodCertificate != nil && s.PodCertificate.SignerName == signer {
				return true
			}
		}
	}
	return false
}
