package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The kube-system/extension-apiserver-authentication ConfigMap tells
// extension API servers how to authenticate what reaches them, as
// upstream's cluster-authentication-trust controller publishes it: the
// CA of client certificates, and the CA, names and headers of the front
// proxy (this API server) whose X-Remote-* headers they may believe.
const (
	authConfigMapNamespace = metav1.NamespaceSystem
	authConfigMapName      = "extension-apiserver-authentication"
)

// Header names the proxy sets (client-go's SetAuthProxyHeaders).
var (
	usernameHeaders    = []string{"X-Remote-User"}
	uidHeaders         = []string{"X-Remote-Uid"}
	groupHeaders       = []string{"X-Remote-Group"}
	extraHeaderPrefix  = []string{"X-Remote-Extra-"}
	frontProxyAllowCNs = []string{"front-proxy-client"}
)

// authenticationData is the ConfigMap's data. The lists are JSON arrays,
// as extension API servers parse them.
func authenticationData(clientCA, requestHeaderCA []byte, allowedNames []string) (map[string]string, error) {
	data := map[string]string{}
	if len(clientCA) > 0 {
		data["client-ca-file"] = string(clientCA)
	}
	if len(requestHeaderCA) == 0 {
		return data, nil
	}
	lists := map[string][]string{
		"requestheader-username-headers":     usernameHeaders,
		"requestheader-uid-headers":          uidHeaders,
		"requestheader-group-headers":        groupHeaders,
		"requestheader-extra-headers-prefix": extraHeaderPrefix,
		"requestheader-allowed-names":        allowedNames,
	}
	for k, v := range lists {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", k, err)
		}
		data[k] = string(b)
	}
	data["requestheader-client-ca-file"] = string(requestHeaderCA)
	return data, nil
}

// publishAuthentication creates or updates the ConfigMap when its data
// differs from what it should be.
func publishAuthentication(ctx context.Context, client kubernetes.Interface, data map[string]string) error {
	cms := client.CoreV1().ConfigMaps(authConfigMapNamespace)
	cur, err := cms.Get(ctx, authConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: authConfigMapName, Namespace: authConfigMapNamespace}, Data: data}, metav1.CreateOptions{})
	case err == nil && !maps.Equal(cur.Data, data):
		cur.Data = data
		_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("configmap %s/%s: %w", authConfigMapNamespace, authConfigMapName, err)
	}
	return nil
}
