package join

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"skiff/jointoken"
)

// loadStored returns the stored certificates if they are for this node,
// chain to a stored CA whose hash is the token's, and have not expired.
func (c *Credentials) loadStored() (*pairs, []byte) {
	caPEM, err := os.ReadFile(c.CACertFile)
	if err != nil || jointoken.CAHash(caPEM) != c.token.CAHash {
		return nil, nil
	}
	p, err := readPairs(c.ClientCertFile, c.ClientKeyFile, c.ServingCertFile, c.ServingKeyFile, caPEM, c.NodeName)
	if err != nil {
		c.cfg.Logger.Info("stored node certificates are not usable", "err", err)
		return nil, nil
	}
	now := c.cfg.Now()
	if !now.Before(p.clientX509.NotAfter) || !now.Before(p.servingX509.NotAfter) {
		return nil, nil
	}
	return p, caPEM
}

func readPairs(clientCert, clientKey, servingCert, servingKey string, caPEM []byte, node string) (*pairs, error) {
	read := func(cert, key string, usage x509.ExtKeyUsage) (*pairHalf, error) {
		cp, err := os.ReadFile(cert)
		if err != nil {
			return nil, err
		}
		kp, err := os.ReadFile(key)
		if err != nil {
			return nil, err
		}
		h, err := loadPair(cp, kp, caPEM, usage, node)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cert, err)
		}
		return h, nil
	}
	cl, err := read(clientCert, clientKey, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	sv, err := read(servingCert, servingKey, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	return &pairs{client: cl.tls, clientX509: cl.x509, serving: sv.tls, servingX509: sv.x509}, nil
}

// store writes new certificates (keys before certs, each file atomically),
// the CA, the token (if given) and the kubeconfig, then serves them.
func (c *Credentials) store(res *issued, token string) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{c.CACertFile, []byte(c.CAPEM), 0o644},
		{c.ClientKeyFile, res.clientKey, 0o600},
		{c.ClientCertFile, res.clientCert, 0o644},
		{c.ServingKeyFile, res.servingKey, 0o600},
		{c.ServingCertFile, res.servingCert, 0o644},
	}
	if token != "" {
		files = append(files, struct {
			path string
			data []byte
			mode os.FileMode
		}{filepath.Join(c.dir, TokenFile), []byte(token + "\n"), 0o600})
	}
	for _, f := range files {
		if err := writeAtomic(f.path, f.data, f.mode); err != nil {
			return fmt.Errorf("join: %w", err)
		}
	}
	p, err := readPairs(c.ClientCertFile, c.ClientKeyFile, c.ServingCertFile, c.ServingKeyFile, []byte(c.CAPEM), c.NodeName)
	if err != nil {
		return fmt.Errorf("join: reload stored certificates: %w", err)
	}
	c.mu.Lock()
	c.cur = p
	c.mu.Unlock()
	return c.writeConfigFiles()
}

// writeConfigFiles writes the kubeconfig for the current server URL.
func (c *Credentials) writeConfigFiles() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: c.ServerURL, CertificateAuthority: c.CACertFile}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: c.ClientCertFile, ClientKey: c.ClientKeyFile}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: "node"}
	cfg.CurrentContext = "default"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("join: encode kubeconfig: %w", err)
	}
	if have, err := os.ReadFile(c.Kubeconfig); err == nil && string(have) == string(data) {
		return nil
	}
	if err := writeAtomic(c.Kubeconfig, data, 0o600); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	return nil
}

// ensurePassword returns the node password in dir, making it on first use.
// It is kept for the node's life: the server ties the node name to it.
func ensurePassword(dir string) (string, error) {
	path := filepath.Join(dir, PasswordFile)
	data, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(data)) != "" {
		return strings.TrimSpace(string(data)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("join: read node password: %w", err)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("join: node password: %w", err)
	}
	password := hex.EncodeToString(b)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("join: %w", err)
	}
	if err := writeAtomic(path, []byte(password+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("join: %w", err)
	}
	return password, nil
}

// writeAtomic replaces path through a temp file and a rename, so readers
// never see half a key.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
