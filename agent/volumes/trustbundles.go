package volumes

import (
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// trustBundles returns a function listing the cluster's
// ClusterTrustBundles at most once, on first use: a pod may mount hundreds
// of bundles, and one list per sync costs one request instead of one each
// (and each refresh sees one consistent set).
func (m *Manager) trustBundles(ctx context.Context) func() ([]certificatesv1.ClusterTrustBundle, error) {
	var (
		done    bool
		bundles []certificatesv1.ClusterTrustBundle
		err     error
	)
	return func() ([]certificatesv1.ClusterTrustBundle, error) {
		if done {
			return bundles, err
		}
		done = true
		if m.cfg.Client == nil {
			err = fmt.Errorf("no API client to read ClusterTrustBundles")
			return nil, err
		}
		var l *certificatesv1.ClusterTrustBundleList
		if l, err = m.cfg.Client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{}); err != nil {
			err = fmt.Errorf("list ClusterTrustBundles: %w", err)
			return nil, err
		}
		bundles = l.Items
		return bundles, nil
	}
}

// trustBundlePayload is a clusterTrustBundle source's file: the trust
// anchors of the named bundle, or of every bundle of the signer its label
// selector matches (nil matches nothing, empty everything), deduplicated
// and in a stable order. With optional set, no match is an empty file;
// otherwise it is an error and the pod does not start.
func trustBundlePayload(src *corev1.ClusterTrustBundleProjection, def os.FileMode, list func() ([]certificatesv1.ClusterTrustBundle, error)) (payload, error) {
	if err := validatePath(src.Path); err != nil {
		return nil, fmt.Errorf("clusterTrustBundle: %w", err)
	}
	all, err := list()
	if err != nil {
		return nil, err
	}
	var picked []*certificatesv1.ClusterTrustBundle
	var what string
	switch {
	case src.Name != nil:
		what = fmt.Sprintf("ClusterTrustBundle %q not found", *src.Name)
		for i := range all {
			if all[i].Name == *src.Name {
				picked = append(picked, &all[i])
			}
		}
	case src.SignerName != nil:
		what = fmt.Sprintf("combination of signerName %q and labelSelector matched zero ClusterTrustBundles", *src.SignerName)
		sel, err := metav1.LabelSelectorAsSelector(src.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("clusterTrustBundle label selector: %w", err)
		}
		for i := range all {
			if all[i].Spec.SignerName == *src.SignerName && sel.Matches(labels.Set(all[i].Labels)) {
				picked = append(picked, &all[i])
			}
		}
	default:
		return nil, fmt.Errorf("clusterTrustBundle source has neither name nor signerName")
	}
	if len(picked) == 0 {
		if !isTrue(src.Optional) {
			return nil, fmt.Errorf("%s", what)
		}
		return payload{filepath.Clean(src.Path): file{Data: []byte{}, Mode: def}}, nil
	}
	return payload{filepath.Clean(src.Path): file{Data: trustAnchors(picked), Mode: def}}, nil
}

// trustAnchors re-encodes the certificates of the bundles, each once,
// sorted by content: headers and text between blocks are dropped.
func trustAnchors(bundles []*certificatesv1.ClusterTrustBundle) []byte {
	seen := map[string]bool{}
	var ders []string
	for _, b := range bundles {
		rest := []byte(b.Spec.TrustBundle)
		for {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" || seen[string(blk.Bytes)] {
				continue
			}
			seen[string(blk.Bytes)] = true
			ders = append(ders, string(blk.Bytes))
		}
	}
	sort.Strings(ders)
	out := []byte{}
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(d)})...)
	}
	return out
}
