package apiserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
)

// connectRecorder refuses CONNECT to pods/attach and records what
// admission saw.
type connectRecorder struct {
	mu   sync.Mutex
	seen []apiserver.AdmissionAttributes
}

func (c *connectRecorder) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	if a.Op != apiserver.OpConnect {
		return nil
	}
	c.mu.Lock()
	c.seen = append(c.seen, a)
	c.mu.Unlock()
	if a.Subresource == "attach" {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, a.Name, errIs("attaching is refused"))
	}
	return nil
}

type errIs string

func (e errIs) Error() string { return string(e) }

func TestConnect_AdmissionSeesOptionsAndMayRefuse(t *testing.T) {
	base := apitest.Start(t, apitest.Options{})
	ca := newProxyCA(t)
	certs := &apiserver.KubeletClientCert{Dir: t.TempDir(), Issuer: ca, Roots: ca.pool()}
	kp, err := apiserver.NewKubeletProxy(apiserver.KubeletClientConfig{RootCAs: ca.pool(), ClientCertificate: certs.Get, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := &connectRecorder{}
	api, err := apiserver.New(apiserver.Config{Registry: base.Registry, Storage: base.Storage, Authenticator: headerUser{}, Authorizer: getOnly{},
		Kubelet: kp, Admission: []apiserver.Admitter{rec}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(api.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	env := &proxyEnv{url: srv.URL, client: kubernetes.NewForConfigOrDie(base.Config(&auth.User{Name: "admin", Groups: []string{auth.GroupMasters}})),
		kubelet: startFakeKubelet(t, ca), ca: ca}
	if _, err := env.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.node(t, "node-a", "127.0.0.1", env.kubelet.port())
	env.pod(t, "web", "node-a", nil, "app")

	code, body := env.do(t, http.MethodPost, "/api/v1/namespaces/default/pods/web/attach?container=app&stdout=true&stdin=true", "")
	if code != http.StatusForbidden || !strings.Contains(statusMessage(t, body), "attaching is refused") {
		t.Fatalf("attach = %d %s, want admission's 403", code, body)
	}
	code, body = env.do(t, http.MethodPost, "/api/v1/namespaces/default/pods/web/exec?container=app&stdout=true&command=ls&command=-l", "")
	if code == http.StatusForbidden {
		t.Fatalf("exec = %d %s, want it past admission", code, body)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) != 2 {
		t.Fatalf("admission saw %d CONNECT requests, want 2", len(rec.seen))
	}
	attach, ok := rec.seen[0].Object.(*corev1.PodAttachOptions)
	if !ok || !attach.Stdin || !attach.Stdout || attach.Container != "app" || rec.seen[0].Name != "web" || rec.seen[0].Namespace != "default" {
		t.Fatalf("attach admission = %+v (object %#v)", rec.seen[0], rec.seen[0].Object)
	}
	if gvk := attach.GetObjectKind().GroupVersionKind(); gvk.Kind != "PodAttachOptions" || gvk.Version != "v1" {
		t.Fatalf("attach options kind = %v", gvk)
	}
	exec, ok := rec.seen[1].Object.(*corev1.PodExecOptions)
	if !ok || strings.Join(exec.Command, " ") != "ls -l" || rec.seen[1].Subresource != "exec" {
		t.Fatalf("exec admission = %+v (object %#v)", rec.seen[1], rec.seen[1].Object)
	}
}
