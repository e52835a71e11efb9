package e2e

// Helpers of aggregator_test.go: the manifests of the extension API server
// (e2e/testimages/extapi) and its APIService, reads of an APIService's
// Available condition and of raw status codes, and the metrics-server
// chart from its Go module.

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

const (
	agNS      = "wardle"
	agSvc     = "extapi"
	agGroup   = "wardle.skiff.test"
	agVersion = "v1alpha1"
	agAPISvc  = agVersion + "." + agGroup
	// agPodPort is the server's own port; the Service and the APIService
	// name 443.
	agPodPort = 8443
)

// agManifests are the namespace, the server's ServiceAccount and its right
// to read kube-system/extension-apiserver-authentication, the TLS Secret
// mounted where extapi reads it by default, a one-replica Deployment bound
// to node (so that the API server dials a pod on its own bridge), and the
// Service. extapi's /readyz fails until it has read the ConfigMap, so a
// Ready pod proves the RBAC too.
func agManifests(ref, node string, certPEM, keyPEM []byte) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[2]s, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[2]s-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: %[2]s, namespace: %[1]s}]
---
apiVersion: v1
kind: Secret
metadata: {name: %[2]s-tls, namespace: %[1]s}
type: kubernetes.io/tls
data:
  tls.crt: %[3]s
  tls.key: %[4]s
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      nodeName: %[5]s
      serviceAccountName: %[2]s
      terminationGracePeriodSeconds: 2
      volumes: [{name: certs, secret: {secretName: %[2]s-tls}}]
      containers:
      - name: extapi
        image: %[6]s
        imagePullPolicy: Never
        args: [--secure-port=%[7]d, "--flunders=%[1]s/flunder-a,%[1]s/flunder-b"]
        ports: [{name: https, containerPort: %[7]d}]
        volumeMounts: [{name: certs, mountPath: /apiserver.local.config/certificates, readOnly: true}]
        readinessProbe: {httpGet: {path: /readyz, port: %[7]d, scheme: HTTPS}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  selector: {app: %[2]s}
  ports: [{name: https, port: 443, targetPort: https}]
`, agNS, agSvc, ccB64(certPEM), ccB64(keyPEM), node, ref, agPodPort)
}

// agAPIService registers the group-version with extapi's Service, its
// serving certificate verified against caPEM.
func agAPIService(caPEM []byte) string {
	return fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %[1]s}
spec:
  group: %[2]s
  version: %[3]s
  groupPriorityMinimum: 2000
  versionPriority: 200
  caBundle: %[4]s
  service: {namespace: %[5]s, name: %[6]s, port: 443}
`, agAPISvc, agGroup, agVersion, ccB64(caPEM), agNS, agSvc)
}

// agAliceRBAC lets user alice get and list flunders in agNS, nothing more.
const agAliceRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flunder-reader}
rules: [{apiGroups: [` + agGroup + `], resources: [flunders], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-flunders, namespace: ` + agNS + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flunder-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
`

// agCondition is the Available condition of an APIService as a JSON
// document shows it (nil when it has none), and the document.
func agCondition(t *testing.T, doc string) (*apiregistrationv1.APIServiceCondition, string) {
	t.Helper()
	var s apiregistrationv1.APIService
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatalf("decode APIService: %v: %s", err, doc)
	}
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == apiregistrationv1.Available {
			return &s.Status.Conditions[i], lcJSON(s.Status)
		}
	}
	return nil, lcJSON(s.Status)
}

// agRaw GETs path with the client, bounded by ccBound, and returns the
// status code and the body.
func agRaw(t *testing.T, cs kubernetes.Interface, path string) (int, string) {
	t.Helper()
	var code int
	var body []byte
	// A failed answer is an error here, not for the caller: what matters
	// is its code and body.
	_, _ = ccCall(t, "GET "+path, func(ctx context.Context) error {
		res := cs.Discovery().RESTClient().Get().AbsPath(path).Do(ctx)
		res.StatusCode(&code)
		body, _ = res.Raw()
		return res.Error()
	})
	return code, string(body)
}

// agWantServiceUnavailable checks a raw answer is the 503 Status of an
// unavailable aggregated API.
func agWantServiceUnavailable(t *testing.T, what string, code int, body string) {
	t.Helper()
	if code != 503 {
		t.Fatalf("%s: status %d, want 503: %s", what, code, body)
	}
	var st struct{ Kind, Status, Reason string }
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" || st.Status != "Failure" || st.Reason != "ServiceUnavailable" {
		t.Fatalf("%s: body %s (%v), want a Failure Status with reason ServiceUnavailable", what, body, err)
	}
}

// agAPIResources runs `kubectl api-resources`: while an aggregated API is
// down kubectl lists the others and exits 1 naming the groups it could not
// read. It fails the test unless every resource of want is listed and any
// error names only the groups of mayFail.
func agAPIResources(t *testing.T, what string, run func() (string, string, error), want []string, mayFail ...string) string {
	t.Helper()
	out, errOut, err := run()
	if err != nil {
		msg := strings.TrimSpace(errOut)
		if msg == "" || !slices.ContainsFunc(mayFail, func(g string) bool { return strings.Contains(msg, g) }) {
			t.Fatalf("%s: %v: %s%s", what, err, out, errOut)
		}
		// "unable to retrieve the complete list of server APIs: g/v: ...":
		// every group-version kubectl names must be one that may fail.
		for _, f := range strings.Fields(msg) {
			gv, ok := strings.CutSuffix(f, ":")
			if !ok || !strings.Contains(gv, "/") || strings.Contains(gv, "://") {
				continue
			}
			if !slices.ContainsFunc(mayFail, func(g string) bool { return strings.HasPrefix(gv, g+"/") }) {
				t.Fatalf("%s: kubectl could not read %s besides %v: %s", what, gv, mayFail, msg)
			}
		}
		t.Logf("%s: exit %v, stderr: %s", what, err, msg)
	}
	names := map[string]bool{}
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names[f[0]] = true
		}
	}
	for _, w := range want {
		if !names[w] {
			t.Fatalf("%s: %s not listed:\n%s", what, w, out)
		}
	}
	return out
}

// agPoll polls cond every interval until it holds, failing the test with
// cond's last explanation after within.
func agPoll(t *testing.T, within, interval time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, within, why)
		}
		time.Sleep(interval)
	}
}

// The metrics-server chart: charts/metrics-server of the Go module
// sigs.k8s.io/metrics-server at msModuleVersion (chart 3.12.2, app
// 0.7.2), copied to the e2e cache as it is.
const (
	msModule        = "sigs.k8s.io/metrics-server"
	msModuleVersion = "v0.8.0"
	msChartVersion  = "3.12.2"
)

func metricsServerChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(e2eCache(t), "charts", "metrics-server-"+msModuleVersion)
	if _, err := os.Stat(filepath.Join(dst, "Chart.yaml")); err == nil {
		return dst
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := goTool(ctx, e2eCache(t), nil, "mod", "download", "-json", msModule+"@"+msModuleVersion)
	if err != nil {
		t.Fatal(err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s", msModule, msModuleVersion, err, mod.Error)
	}
	if err := copyTree(filepath.Join(mod.Dir, "charts", "metrics-server"), dst); err != nil {
		t.Fatalf("metrics-server chart: %v", err)
	}
	return dst
}

// copyTree copies src to dst through a temp directory renamed into place,
// so that a killed copy leaves nothing to be taken for a whole chart; the
// files get writable modes (the module cache's are read-only).
func copyTree(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".copy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		// Another run made it meanwhile: use theirs.
		if _, statErr := os.Stat(filepath.Join(dst, "Chart.yaml")); statErr == nil {
			return nil
		}
		return err
	}
	return nil
}
