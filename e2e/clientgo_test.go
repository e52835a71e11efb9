package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"skiff/server/auth/serviceaccount"
)

// startClusterWith is startCluster with extra `skiff server` flags.
func startClusterWith(t *testing.T, extra ...string) *cluster {
	t.Helper()
	dataDir := t.TempDir()
	port := freePort(t)
	kubeconfig := filepath.Join(dataDir, "kubeconfig.yaml")
	args := append([]string{"server", "--data-dir", dataDir, "--bind-address", "127.0.0.1",
		"--https-listen-port", strconv.Itoa(port), "--write-kubeconfig", kubeconfig}, extra...)
	p := start(t, args...)
	waitHealthy(t, p, port)
	return &cluster{proc: p, kubeconfig: kubeconfig, dataDir: dataDir}
}

// clientGoConfig is the admin client config from the kubeconfig the server
// wrote, with a per-request timeout so no call can hang a test.
func (c *cluster) clientGoConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", c.kubeconfig, err)
	}
	if !strings.HasPrefix(cfg.Host, "https://") || len(cfg.CAData) == 0 || len(cfg.CertData) == 0 {
		t.Fatalf("kubeconfig: want an https server, inline CA and client certificate; got host %q, %d bytes CA, %d bytes cert",
			cfg.Host, len(cfg.CAData), len(cfg.CertData))
	}
	cfg.Timeout = 20 * time.Second
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// cgAnonymousConfig trusts the cluster's CA but carries no credentials.
func cgAnonymousConfig(admin *rest.Config) *rest.Config {
	return &rest.Config{
		Host:            admin.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData},
		Timeout:         admin.Timeout,
		QPS:             admin.QPS,
		Burst:           admin.Burst,
	}
}

func cgClientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func cgContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func cgNamespace(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// cgEventually polls cond every interval until it returns true, fails the
// test when cond returns an error, and fails after within.
func cgEventually(t *testing.T, what string, within, interval time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last error: %v)", what, within, last)
		}
		time.Sleep(interval)
	}
}

func TestClientGo_Informer_SeesAddUpdateDeleteInOrder(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := cgContext(t, 60*time.Second)
	cs := cgClientset(t, c.clientGoConfig(t))
	const ns, name = "informer", "watched"
	cgNamespace(t, ctx, cs, ns)

	events := make(chan string, 64)
	record := func(verb string, o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		cm, ok := o.(*corev1.ConfigMap)
		if !ok {
			events <- fmt.Sprintf("%s of a %T", verb, o)
			return
		}
		if cm.Name == name { // the namespace also gets kube-root-ca.crt
			events <- verb + " v=" + cm.Data["v"]
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record("add", o) },
		UpdateFunc: func(_, o any) { record("update", o) },
		DeleteFunc: func(o any) { record("delete", o) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync within the test's deadline")
	}

	cms := cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "2"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	want := []string{"add v=1", "update v=2", "delete v=2"}
	var got []string
	for len(got) < len(want) {
		select {
		case e := <-events:
			got = append(got, e)
		case <-time.After(15 * time.Second):
			t.Fatalf("informer events %q, want %q; nothing more came within 15s", got, want)
		}
	}
	// Nothing else (a duplicate add, an extra update) may follow.
	select {
	case e := <-events:
		got = append(got, e)
	case <-time.After(time.Second):
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("informer events %q, want %q", got, want)
	}
}

// cgNewCA makes a self-signed CA that has nothing to do with the cluster.
func cgNewCA(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestClientGo_WrongCA_IsRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := cgContext(t, 60*time.Second)
	admin := c.clientGoConfig(t)
	otherCA := cgNewCA(t, "not-the-skiff-ca")

	wrong := rest.CopyConfig(admin) // keeps the valid client certificate
	wrong.CAData, wrong.CAFile = otherCA, ""
	_, err := cgClientset(t, wrong).CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "through-wrong-ca"}}, metav1.CreateOptions{})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("create through a client trusting another CA: err %v (%T), want x509 unknown authority", err, err)
	}
	if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("error %q does not say the certificate is signed by an unknown authority", err)
	}
	if _, ok := err.(apierrors.APIStatus); ok {
		t.Fatalf("error %v is an API status: the request reached the server", err)
	}

	_, err = cgClientset(t, admin).CoreV1().ConfigMaps("default").Get(ctx, "through-wrong-ca", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get through the right CA after the refused create: %v, want NotFound", err)
	}
}

func TestClientGo_NoCredentials_Gets401(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := cgContext(t, 60*time.Second)
	admin := c.clientGoConfig(t)
	anon := cgClientset(t, cgAnonymousConfig(admin))

	_, err := anon.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("list pods without credentials: %v, want 401 Unauthorized", err)
	}
	_, err = anon.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "anonymous"}}, metav1.CreateOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("create without credentials: %v, want 401 Unauthorized", err)
	}
	if _, err := cgClientset(t, admin).CoreV1().ConfigMaps("default").Get(ctx, "anonymous", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the anonymous create left something behind: get: %v", err)
	}

	body, err := anon.Discovery().RESTClient().Get().AbsPath("/healthz").DoRaw(ctx)
	if err != nil || string(body) != "ok" {
		t.Fatalf("anonymous /healthz: %q, %v; want ok", body, err)
	}
	v, err := anon.Discovery().ServerVersion()
	if err != nil || !strings.HasPrefix(v.GitVersion, "v") {
		t.Fatalf("anonymous /version: %+v, %v; want a version", v, err)
	}

	bad := cgAnonymousConfig(admin)
	bad.BearerToken = "not-a-token"
	_, err = cgClientset(t, bad).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("list pods with a garbage bearer token: %v, want 401 Unauthorized", err)
	}
}

// cgServiceAccountWithView makes a service account bound to ClusterRole view
// in its namespace.
func cgServiceAccountWithView(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service account: %v", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role binding: %v", err)
	}
}

// cgTokenConfig authenticates with a bearer token only.
func cgTokenConfig(admin *rest.Config, token string) *rest.Config {
	cfg := cgAnonymousConfig(admin)
	cfg.BearerToken = token
	return cfg
}

func TestClientGo_ServiceAccountToken_WorksUntilExpiryThenRefused(t *testing.T) {
	t.Parallel()
	if serviceaccount.Leeway > 90*time.Second {
		t.Fatalf("the token validator's leeway is %v: waiting it out would make this test too slow; rework the test", serviceaccount.Leeway)
	}
	c := startClusterWith(t, "--service-account-min-token-expiration=2s")
	ctx := cgContext(t, serviceaccount.Leeway+60*time.Second)
	admin := c.clientGoConfig(t)
	cs := cgClientset(t, admin)
	const ns, sa = "tokens", "reader"
	cgNamespace(t, ctx, cs, ns)
	cgServiceAccountWithView(t, ctx, cs, ns, sa)

	tooShort := int64(1)
	_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &tooShort}}, metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("token for 1s with a 2s minimum: %v, want 400", err)
	}

	secs := int64(3)
	issued := time.Now()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	if tr.Status.Token == "" || expires.Before(issued.Add(time.Second)) || expires.After(issued.Add(5*time.Second)) {
		t.Fatalf("token request status: token %d bytes, expires %v, want a token expiring about 3s after %v", len(tr.Status.Token), expires, issued)
	}
	tokenClient := cgClientset(t, cgTokenConfig(admin, tr.Status.Token))
	if _, err := tokenClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list pods with a fresh token bound to view: %v", err)
	}
	_, err = tokenClient.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-token"}}, metav1.CreateOptions{})
	if want := `User "system:serviceaccount:tokens:reader" cannot create`; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("create with a view token: %v, want 403 naming the service account (%s)", err, want)
	}
	forged := tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA"
	if _, err := cgClientset(t, cgTokenConfig(admin, forged)).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("list pods with a token whose signature was altered: %v, want 401", err)
	}

	// Poll until the token stops working: not before it expires, and no
	// later than the validator's clock-skew leeway after that.
	deadline := expires.Add(serviceaccount.Leeway + 10*time.Second)
	for {
		_, err := tokenClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		now := time.Now()
		if apierrors.IsUnauthorized(err) {
			if now.Before(expires) {
				t.Fatalf("token refused at %v, before it expires at %v", now, expires)
			}
			t.Logf("token expiring at %v refused from %v (%v after expiry; leeway %v)", expires, now, now.Sub(expires).Round(time.Second), serviceaccount.Leeway)
			break
		}
		if err != nil {
			t.Fatalf("list pods with the token at %v: %v, want success or 401", now, err)
		}
		if now.After(deadline) {
			t.Fatalf("token expiring at %v still accepted at %v, past the %v leeway", expires, now, serviceaccount.Leeway)
		}
		time.Sleep(time.Second)
	}
	if _, err := tokenClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("expired token once more: %v, want 401", err)
	}
}

func TestClientGo_PodBoundToken_RefusedOnceThePodIsDeleted(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := cgContext(t, 60*time.Second)
	admin := c.clientGoConfig(t)
	cs := cgClientset(t, admin)
	const ns, sa = "bound", "runner"
	cgNamespace(t, ctx, cs, ns)
	cgServiceAccountWithView(t, ctx, cs, ns, sa)
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "holder"},
		Spec:       corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}

	other := types.UID("00000000-0000-0000-0000-000000000000")
	_, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: other},
	}}, metav1.CreateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("token bound to the pod's name with another uid: %v, want 409", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod-bound token: %v", err)
	}
	tokenClient := cgClientset(t, cgTokenConfig(admin, tr.Status.Token))
	if _, err := tokenClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list pods with the pod-bound token while the pod exists: %v", err)
	}

	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	cgEventually(t, "pod-bound token refused after the pod is deleted", 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		_, err := tokenClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			return false, nil
		}
		if !apierrors.IsUnauthorized(err) {
			t.Fatalf("list pods with the token of a deleted pod: %v, want 401", err)
		}
		return true, nil
	})

	// A new pod under the same name does not revive the token.
	again, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name},
		Spec:       corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("recreate pod: %v", err)
	}
	if again.UID == pod.UID {
		t.Fatalf("recreated pod has the old uid %s", pod.UID)
	}
	tr2, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: again.Name, UID: again.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token for the recreated pod: %v", err)
	}
	// Once the new pod's own token works, the validator sees the new pod.
	fresh := cgClientset(t, cgTokenConfig(admin, tr2.Status.Token))
	cgEventually(t, "token of the recreated pod accepted", 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		_, err := fresh.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	if _, err := tokenClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("token of the deleted pod after a pod of the same name was created: %v, want 401", err)
	}
}

// cgClientCertConfig signs a client certificate for user (and groups) with
// the cluster's CA files, as an administrator handing out access would.
func cgClientCertConfig(t *testing.T, c *cluster, admin *rest.Config, user string, groups ...string) *rest.Config {
	t.Helper()
	dir := filepath.Join(c.dataDir, "server", "tls")
	caPEM, err := os.ReadFile(filepath.Join(dir, "server-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "server-ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("server-ca.crt: no PEM block")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		t.Fatal("server-ca.key: no PEM block")
	}
	var caKey any
	switch kb.Type {
	case "EC PRIVATE KEY":
		caKey, err = x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		caKey, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	default:
		caKey, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	}
	if err != nil {
		t.Fatalf("server-ca.key: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cgAnonymousConfig(admin)
	cfg.CertData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cfg.KeyData = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return cfg
}

func TestClientGo_ViewOnlyUser_Gets403OnWrites(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := cgContext(t, 60*time.Second)
	admin := c.clientGoConfig(t)
	cs := cgClientset(t, admin)
	const ns, user = "viewing", "viewer"
	cgNamespace(t, ctx, cs, ns)
	existing, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	viewer := cgClientset(t, cgClientCertConfig(t, c, admin, user))
	cms := viewer.CoreV1().ConfigMaps(ns)

	cgEventually(t, "viewer can get the configmap once bound to view", 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		got, err := cms.Get(ctx, "existing", metav1.GetOptions{})
		return err == nil && got.Data["k"] == "v", err
	})
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("viewer list: %v", err)
	}
	names := map[string]bool{}
	for _, cm := range list.Items {
		names[cm.Name] = true
	}
	if !names["existing"] {
		t.Fatalf("viewer list: %v, want it to include existing", names)
	}

	scope := fmt.Sprintf(`in API group "" in the namespace %q`, ns)
	forbidden := func(op string, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Fatalf("viewer %s: %v, want 403 Forbidden", op, err)
		}
		if got := err.Error(); got != want {
			t.Fatalf("viewer %s: message\n%s\nwant upstream's\n%s", op, got, want)
		}
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	forbidden("create", err, `configmaps is forbidden: User "viewer" cannot create resource "configmaps" `+scope)
	changed := existing.DeepCopy()
	changed.Data["k"] = "changed"
	_, err = cms.Update(ctx, changed, metav1.UpdateOptions{})
	forbidden("update", err, `configmaps "existing" is forbidden: User "viewer" cannot update resource "configmaps" `+scope)
	_, err = cms.Patch(ctx, "existing", types.MergePatchType, []byte(`{"data":{"k":"patched"}}`), metav1.PatchOptions{})
	forbidden("patch", err, `configmaps "existing" is forbidden: User "viewer" cannot patch resource "configmaps" `+scope)
	err = cms.Delete(ctx, "existing", metav1.DeleteOptions{})
	forbidden("delete", err, `configmaps "existing" is forbidden: User "viewer" cannot delete resource "configmaps" `+scope)
	_, err = viewer.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	forbidden("list secrets", err, `secrets is forbidden: User "viewer" cannot list resource "secrets" `+scope)
	_, err = viewer.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	forbidden("list in another namespace", err, `configmaps is forbidden: User "viewer" cannot list resource "configmaps" in API group "" in the namespace "default"`)

	after, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range after.Items {
		if cm.Name == "new" || (cm.Name == "existing" && (cm.Data["k"] != "v" || cm.ResourceVersion != existing.ResourceVersion)) {
			t.Fatalf("a refused write took effect: %s data %v rv %s (was rv %s)", cm.Name, cm.Data, cm.ResourceVersion, existing.ResourceVersion)
		}
	}
}

// cgContentTypes records the Content-Type of every request with a body.
type cgContentTypes struct {
	mu   sync.Mutex
	seen []string
	next http.RoundTripper
}

func (c *cgContentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		c.mu.Lock()
		c.seen = append(c.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

func (c *cgContentTypes) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

func cgResourceVersion(t *testing.T, what string, m metav1.Object) int64 {
	t.Helper()
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil || rv <= 0 {
		t.Fatalf("%s: resourceVersion %q is not a positive integer", what, m.GetResourceVersion())
	}
	return rv
}

func TestClientGo_TypedClients_UseProtobufAndItWorks(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := cgContext(t, 60*time.Second)
	cfg := c.clientGoConfig(t)
	rec := &cgContentTypes{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	cs := cgClientset(t, cfg)
	const ns = "proto"
	cgNamespace(t, ctx, cs, ns)

	// Deployment: generation follows spec changes only; resourceVersion
	// follows every change.
	deploys := cs.AppsV1().Deployments(ns)
	replicas := int32(2)
	labels := map[string]string{"app": "web"}
	d, err := deploys.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	if d.Generation != 1 || d.UID == "" || d.CreationTimestamp.IsZero() || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" {
		t.Fatalf("created deployment: generation %d uid %q created %v replicas %d image %q; want generation 1, server-set uid and timestamp, the spec sent",
			d.Generation, d.UID, d.CreationTimestamp, *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 10 {
		t.Fatalf("created deployment not defaulted: strategy %+v revisionHistoryLimit %v", d.Spec.Strategy, d.Spec.RevisionHistoryLimit)
	}
	rv1 := cgResourceVersion(t, "created deployment", d)

	// The deployment controller writes the object too (its revision
	// annotation, status), so updates start from the latest copy and retry
	// on 409, as real clients do.
	update := func(what string, from *appsv1.Deployment, mutate func(*appsv1.Deployment)) *appsv1.Deployment {
		t.Helper()
		var out *appsv1.Deployment
		cur := from.DeepCopy()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mutate(cur)
			var err error
			if out, err = deploys.Update(ctx, cur, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
				if latest, gerr := deploys.Get(ctx, from.Name, metav1.GetOptions{}); gerr == nil {
					cur = latest
				}
			}
			return err
		})
		if err != nil {
			t.Fatalf("update deployment %s: %v", what, err)
		}
		return out
	}
	d2 := update("image", d, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" })
	rv2 := cgResourceVersion(t, "deployment after a spec change", d2)
	if d2.Generation != 2 || rv2 <= rv1 || d2.Spec.Template.Spec.Containers[0].Image != "nginx:1.28" || d2.UID != d.UID {
		t.Fatalf("after a spec change: generation %d rv %d (was %d) image %q uid %q; want generation 2, a larger rv, the new image, the same uid",
			d2.Generation, rv2, rv1, d2.Spec.Template.Spec.Containers[0].Image, d2.UID)
	}
	d3 := update("labels", d2, func(d *appsv1.Deployment) { d.Labels = map[string]string{"tier": "frontend"} })
	rv3 := cgResourceVersion(t, "deployment after a label change", d3)
	if d3.Generation != 2 || rv3 <= rv2 || d3.Labels["tier"] != "frontend" {
		t.Fatalf("after a metadata-only change: generation %d rv %d (was %d) labels %v; want generation still 2, a larger rv, the label", d3.Generation, rv3, rv2, d3.Labels)
	}
	if _, err := deploys.Update(ctx, d, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with the stale resourceVersion %s: %v, want 409 Conflict", d.ResourceVersion, err)
	}
	if err := deploys.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete deployment: %v", err)
	}
	cgEventually(t, "deployment gone after delete", 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		_, err := deploys.Get(ctx, "web", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return apierrors.IsNotFound(err), nil
	})

	// Service: the server allocates a cluster IP from 10.43.0.0/16 and
	// keeps it across updates.
	svcs := cs.CoreV1().Services(ns)
	svc, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	_, serviceNet, _ := net.ParseCIDR("10.43.0.0/16")
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if ip == nil || !serviceNet.Contains(ip) || svc.Spec.ClusterIP == "10.43.0.1" || len(svc.Spec.ClusterIPs) != 1 || svc.Spec.ClusterIPs[0] != svc.Spec.ClusterIP {
		t.Fatalf("created service: clusterIP %q clusterIPs %q; want one address in 10.43.0.0/16 other than the API server's 10.43.0.1", svc.Spec.ClusterIP, svc.Spec.ClusterIPs)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].TargetPort.IntValue() != 80 {
		t.Fatalf("created service not defaulted: type %q targetPort %v", svc.Spec.Type, svc.Spec.Ports[0].TargetPort)
	}
	srv1 := cgResourceVersion(t, "created service", svc)
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	svc2, err := svcs.Update(ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update service: %v", err)
	}
	if srv2 := cgResourceVersion(t, "updated service", svc2); srv2 <= srv1 || svc2.Spec.ClusterIP != svc.Spec.ClusterIP || len(svc2.Spec.Ports) != 2 {
		t.Fatalf("updated service: rv %d (was %d) clusterIP %q (was %q) ports %d; want a larger rv, the same IP, 2 ports", srv2, srv1, svc2.Spec.ClusterIP, svc.Spec.ClusterIP, len(svc2.Spec.Ports))
	}
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service: %v", err)
	}
	if _, err := svcs.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get service after delete: %v, want NotFound", err)
	}

	// Every body the typed clients sent was protobuf.
	seen := rec.snapshot()
	writes := 0
	for _, s := range seen {
		if !strings.HasSuffix(s, " application/vnd.kubernetes.protobuf") {
			t.Fatalf("typed client request not sent as protobuf: %s (all: %q)", s, seen)
		}
		if strings.Contains(s, "/deployments") || strings.Contains(s, "/services") {
			writes++
		}
	}
	if writes < 5 {
		t.Fatalf("saw %d protobuf writes of deployments and services, want at least 5: %q", writes, seen)
	}
}
