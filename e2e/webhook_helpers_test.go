package e2e

// Helpers of webhook_test.go: the cases' namespaces and webhook
// configurations, and kubectl runs of either version.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// whEnv is the cluster with admwebhook running in it.
type whEnv struct {
	c        *netCluster
	kubectls map[string]string // version -> binary
	caPEM    []byte            // the CA of admwebhook's serving certificate
}

// whHook is one webhook of a case's configuration; a zero field takes the
// default noted.
type whHook struct {
	name string // before whDomain
	path string // admwebhook's path
	// objectLabels are the objectSelector's matchLabels (none).
	objectLabels   map[string]string
	failurePolicy  string // Fail
	timeoutSeconds int    // the API server's default (10 s)
	sideEffects    string // None
}

// run runs kubectl v with stdin in the server's namespace.
func (e *whEnv) run(v, stdin string, args ...string) (stdout, stderr string, err error) {
	return e.c.kubectlBinIn(e.kubectls[v], stdin, args...)
}

// ok runs kubectl v, which must succeed.
func (e *whEnv) ok(t *testing.T, v, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := e.run(v, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s %s: %v: %s%s", v, strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout, stderr
}

// refused runs kubectl v, which must fail, and returns its stderr.
func (e *whEnv) refused(t *testing.T, v, stdin string, args ...string) string {
	t.Helper()
	stdout, stderr, err := e.run(v, stdin, args...)
	if err == nil {
		t.Fatalf("kubectl %s %s succeeded, want it refused: %s%s", v, strings.Join(args, " "), stdout, stderr)
	}
	return stderr
}

func (e *whEnv) getConfigMap(t *testing.T, v, ns, name string) corev1.ConfigMap {
	t.Helper()
	out, _ := e.ok(t, v, "", "get", "configmap", name, "-n", ns, "-o", "json")
	var cm corev1.ConfigMap
	if err := json.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatalf("decode configmap %s/%s: %v: %s", ns, name, err, out)
	}
	return cm
}

// wantNotFound checks that no ConfigMap ns/name is stored.
func (e *whEnv) wantNotFound(t *testing.T, v, ns, name string) {
	t.Helper()
	errOut := e.refused(t, v, "", "get", "configmap", name, "-n", ns)
	mustContain(t, "get configmap "+name, errOut, fmt.Sprintf(`configmaps %q not found`, name))
}

// whConfigMap is a ConfigMap manifest (no namespace: kubectl's -n).
func whConfigMap(name string, labels map[string]string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, labels: %s}\ndata: {k: v}\n", name, whFlowMap(labels))
}

// whFlowMap is m as a YAML flow mapping, keys sorted, all quoted.
func whFlowMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%q: %q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// setup makes the case's namespaces (one per kubectl version) and its
// configuration wh-<name> of kind with hooks, in force when it returns;
// both go when the test ends.
func (e *whEnv) setup(t *testing.T, name, kind string, hooks ...whHook) map[string]string {
	t.Helper()
	nss := e.namespaces(t, name, true)
	cfg := "wh-" + name
	if out, errOut, err := e.run("1.33", e.config(kind, cfg, name, hooks...), "create", "-f", "-"); err != nil {
		t.Fatalf("create %s %s: %v: %s%s", kind, cfg, err, out, errOut)
	}
	t.Cleanup(func() {
		if out, errOut, err := e.run("1.33", "", "delete", strings.ToLower(kind), cfg, "--ignore-not-found"); err != nil {
			t.Errorf("delete %s %s: %v: %s%s", kind, cfg, err, out, errOut)
		}
	})
	e.awaitMarker(t, nss[whVersions[0]], cfg)
	return nss
}

// namespaces makes wh-<name>-<version> for each kubectl version, labelled
// into the case if labelled, and waits for the cluster's kube-root-ca.crt
// ConfigMap in each: made before any webhook of the case is in force, it
// is never sent to one.
func (e *whEnv) namespaces(t *testing.T, name string, labelled bool) map[string]string {
	t.Helper()
	nss := map[string]string{}
	var manifest strings.Builder
	for _, v := range whVersions {
		ns := "wh-" + name + "-" + strings.ReplaceAll(v, ".", "")
		nss[v] = ns
		labels := map[string]string{}
		if labelled {
			labels[whCaseLabel] = name
		}
		fmt.Fprintf(&manifest, "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: %s}\n", ns, whFlowMap(labels))
	}
	if out, errOut, err := e.run("1.33", manifest.String(), "create", "-f", "-"); err != nil {
		t.Fatalf("create namespaces: %v: %s%s", err, out, errOut)
	}
	t.Cleanup(func() {
		for _, ns := range nss {
			// The cluster goes with the test: no need to wait.
			_, _, _ = e.run("1.33", "", "delete", "namespace", ns, "--wait=false")
		}
	})
	for _, ns := range nss {
		lcWait(t, e.c, time.Minute, 200*time.Millisecond, "kube-root-ca.crt in "+ns, func() (bool, string) {
			out, errOut, err := e.run("1.33", "", "get", "configmap", "kube-root-ca.crt", "-n", ns, "-o", "name")
			return err == nil, out + errOut
		})
	}
	return nss
}

// config is a configuration of kind named name for the case: a marker
// webhook first (see awaitMarker), then hooks, each called for CREATE and
// UPDATE of ConfigMaps in the case's namespaces, never for markers.
func (e *whEnv) config(kind, name, caseName string, hooks ...whHook) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: admissionregistration.k8s.io/v1\nkind: %s\nmetadata: {name: %s}\nwebhooks:\n", kind, name)
	marker := whHook{name: "marker", path: "/deny"}
	for i, h := range append([]whHook{marker}, hooks...) {
		sel := fmt.Sprintf("{matchLabels: %s, matchExpressions: [{key: %q, operator: DoesNotExist}]}", whFlowMap(h.objectLabels), whMarkerLabel)
		if i == 0 {
			sel = fmt.Sprintf("{matchLabels: %s}", whFlowMap(map[string]string{whMarkerLabel: name}))
		}
		fmt.Fprintf(&b, `- name: %s%s
  admissionReviewVersions: [v1]
  sideEffects: %s
  failurePolicy: %s
  clientConfig:
    caBundle: %s
    service: {namespace: %s, name: %s, path: %s, port: %d}
  rules: [{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  namespaceSelector: {matchLabels: %s}
  objectSelector: %s
`, h.name, whDomain, cmp.Or(h.sideEffects, "None"), cmp.Or(h.failurePolicy, "Fail"), ccB64(e.caPEM), whNS, whSvc, h.path, ccSvcPort,
			whFlowMap(map[string]string{whCaseLabel: caseName}), sel)
		if h.timeoutSeconds != 0 {
			fmt.Fprintf(&b, "  timeoutSeconds: %d\n", h.timeoutSeconds)
		}
	}
	return b.String()
}

// awaitMarker waits until configuration cfg is in force: as upstream's
// webhook tests, it creates marker ConfigMaps in ns until the marker
// webhook, which denies exactly those, refuses one.
func (e *whEnv) awaitMarker(t *testing.T, ns, cfg string) {
	t.Helper()
	probe := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: marker-, labels: %s}\n",
		whFlowMap(map[string]string{whMarkerLabel: cfg}))
	want := `admission webhook "marker` + whDomain + `" denied the request`
	lcWait(t, e.c, time.Minute, 200*time.Millisecond, cfg+" in force", func() (bool, string) {
		out, errOut, err := e.run("1.33", probe, "create", "-n", ns, "-f", "-")
		return err != nil && strings.Contains(errOut, want), fmt.Sprintf("%v: %s%s", err, out, errOut)
	}, func() string { return e.c.kubectlNoFail("logs", "-n", whNS, whSvc) })
}
