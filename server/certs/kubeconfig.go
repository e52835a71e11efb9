package certs

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigName names the cluster, user and context, as k3s's k3s.yaml does.
const kubeconfigName = "default"

// WriteKubeconfig writes a self-contained kubeconfig (CA, client cert and
// key embedded) for serverURL to path. mode 0 means 0600. The file is
// replaced atomically, so mode applies even when it already existed and a
// reader never sees half a file.
func WriteKubeconfig(path string, mode os.FileMode, serverURL string, caPEM, certPEM, keyPEM []byte) error {
	if mode == 0 {
		mode = keyMode
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigName] = &clientcmdapi.Cluster{
		Server:                   serverURL,
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[kubeconfigName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: certPEM,
		ClientKeyData:         keyPEM,
	}
	cfg.Contexts[kubeconfigName] = &clientcmdapi.Context{
		Cluster:  kubeconfigName,
		AuthInfo: kubeconfigName,
	}
	cfg.CurrentContext = kubeconfigName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	// The directory is usually shared (/etc/rancher/..., ~/.kube), so it
	// gets ordinary permissions; the secret is protected by the file mode.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create kubeconfig directory: %w", err)
	}
	if err := writeFileAtomic(path, data, mode); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
