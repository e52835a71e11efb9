package join_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	agentjoin "skiff/agent/join"
	"skiff/server"
	"skiff/server/join"
)

// TestAgentJoinsTheRealServerAndIsLimitedToItsOwnObjects runs the whole
// server and joins agents to it: the protocol end to end, then the node
// authorizer and NodeRestriction on the node's own credentials. It lives
// here, in an external test package, because it needs both sides.
func TestAgentJoinsTheRealServerAndIsLimitedToItsOwnObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	addrc := make(chan net.Addr, 1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(runCtx, server.Config{DataDir: dir, BindAddress: "127.0.0.1", Port: 0,
			ServiceCIDR: "10.43.0.0/16", ClusterCIDR: "10.42.0.0/16", ClusterDomain: "cluster.local",
			KubeconfigPath: filepath.Join(dir, "admin.yaml"), DisableScheduler: true, DisableControllers: true,
			Version: version.Info{GitVersion: "v1.37.0"}, Logger: quiet, Listening: func(a net.Addr) { addrc <- a }})
	}()
	t.Cleanup(func() { stop(); <-done })
	var url string
	select {
	case a := <-addrc:
		url = "https://127.0.0.1:" + strconv.Itoa(a.(*net.TCPAddr).Port)
	case err := <-done:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("server did not start")
	}
	tokenBytes, err := os.ReadFile(join.ServerTokenPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	adminCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(adminCfg)

	agent := func(name, dataDir, tok string) (*agentjoin.Credentials, error) {
		return agentjoin.Join(ctx, agentjoin.Config{ServerURL: url, Token: tok, NodeName: name, DataDir: dataDir,
			NodeIPs: []net.IP{net.ParseIP("10.0.0.9")}, Logger: quiet})
	}
	creds, err := agent("n1", t.TempDir(), token)
	if err != nil {
		t.Fatal(err)
	}
	nodeCfg, err := clientcmd.BuildConfigFromFlags("", creds.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	n1 := kubernetes.NewForConfigOrDie(nodeCfg)

	t.Run("a second machine cannot take the name", func(t *testing.T) {
		_, err := agent("n1", t.TempDir(), token)
		if !errors.Is(err, agentjoin.ErrForbidden) || !strings.Contains(err.Error(), "node password rejected") {
			t.Fatalf("join as n1 from another machine = %v", err)
		}
	})
	t.Run("a wrong secret is refused", func(t *testing.T) {
		bad := token[:strings.LastIndex(token, ":")+1] + "wrong"
		if _, err := agent("n9", t.TempDir(), bad); !errors.Is(err, agentjoin.ErrUnauthorized) {
			t.Fatalf("join with a wrong secret = %v", err)
		}
	})
	t.Run("skiff token create, list and delete", func(t *testing.T) {
		run := func(args ...string) string {
			t.Helper()
			var out bytes.Buffer
			cmd := join.TokenCommand()
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append(args, "--kubeconfig", filepath.Join(dir, "admin.yaml")))
			if err := cmd.ExecuteContext(ctx); err != nil {
				t.Fatalf("skiff token %v: %v\n%s", args, err, out.String())
			}
			return out.String()
		}
		tok := strings.TrimSpace(run("create", "--ttl", "2h", "--description", "cli"))
		if !strings.HasPrefix(tok, "K10") || !strings.HasPrefix(tok, token[:strings.Index(token, "::")]) {
			t.Fatalf("created %q: want the server token's CA hash", tok)
		}
		id := tok[strings.Index(tok, "::")+2 : strings.Index(tok, ".")]
		if list := run("list"); !strings.Contains(list, id) || !strings.Contains(list, "cli") {
			t.Fatalf("token list:\n%s", list)
		}
		run("delete", id)
		if _, err := agent("n5", t.TempDir(), tok); !errors.Is(err, agentjoin.ErrUnauthorized) {
			t.Fatalf("join with a deleted token = %v", err)
		}
	})
	t.Run("an extra token joins", func(t *testing.T) {
		extra, err := join.CreateToken(ctx, admin, adminCfg.CAData, time.Hour, "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agent("n3", t.TempDir(), extra); err != nil {
			t.Fatalf("join with an extra token: %v", err)
		}
	})

	node, err := n1.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node registers itself: %v", err)
	}
	node.Labels = map[string]string{"example.com/x": "y"}
	if _, err := n1.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node updates itself: %v", err)
	}
	other, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Labels = map[string]string{"hijacked": "true"}
	if _, err := n1.CoreV1().Nodes().Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node updates another node: %v, want 403", err)
	}
	if _, err := n1.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n4"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node registers another node: %v, want 403", err)
	}

	for _, name := range []string{"mine", "unrelated"} {
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
		NodeName: "n1", AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		Volumes:    []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "mine"}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n1.CoreV1().Secrets("default").Get(ctx, "mine", metav1.GetOptions{}); err != nil {
		t.Fatalf("node reads the secret its pod uses: %v", err)
	}
	if _, err := n1.CoreV1().Secrets("default").Get(ctx, "unrelated", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node reads an unrelated secret: %v, want 403", err)
	}
	if _, err := n1.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=mine"}); err != nil {
		t.Fatalf("node lists the secret its pod uses by name: %v", err)
	}
	if _, err := n1.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node lists all secrets: %v, want 403", err)
	}

	// Last: client-go notices the renewed files and closes the node
	// client's connections once, failing a request in flight.
	t.Run("the node renews with its client certificate", func(t *testing.T) {
		before, _ := creds.GetClientCertificate(nil)
		if err := creds.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		after, _ := creds.GetClientCertificate(nil)
		if before.Leaf.SerialNumber.Cmp(after.Leaf.SerialNumber) == 0 {
			t.Fatal("the client certificate was not replaced")
		}
	})
}
