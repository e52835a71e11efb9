package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelm_CertManagerChart_InstallUpgradeRollbackUninstall installs the
// real cert-manager chart, CRDs included, as a user would (its pods cannot
// pull their images here: the test is about the API, not the workload).
func TestHelm_CertManagerChart_InstallUpgradeRollbackUninstall(t *testing.T) {
	c := startCluster(t)
	chart := certManagerChart(t)
	kc := "--kubeconfig=" + c.kubeconfig
	// startupapicheck is a post-install hook Job helm waits for: its pod
	// cannot pull its image here, so the hook is left out.
	helm(t, "install", "cm", chart, kc, "--namespace", "cert-manager", "--create-namespace", "--set", "crds.enabled=true", "--set", "startupapicheck.enabled=false")
	bin := kubectlVersions(t)["1.33"]
	for _, crd := range []string{"certificates.cert-manager.io", "issuers.cert-manager.io", "clusterissuers.cert-manager.io"} {
		c.ok(t, bin, "wait", "--for", "condition=established", "--timeout=30s", "crd/"+crd)
	}
	waitFor(t, 20*time.Second, "issuers in discovery", func() bool {
		out, _, err := c.run(t, bin, "", "api-resources", "--api-group=cert-manager.io")
		return err == nil && strings.Contains(out, "issuers")
	})
	issuer := "apiVersion: cert-manager.io/v1\nkind: Issuer\nmetadata: {name: selfsigned, namespace: default}\nspec: {selfSigned: {}}\n"
	// The chart's webhooks (failurePolicy Fail) are called, and their pod
	// cannot run here: as on a real cluster whose cert-manager webhook is
	// down, a new Issuer is refused naming the webhook.
	_, errOut, err := c.run(t, bin, issuer, "apply", "-f", "-")
	if err == nil {
		t.Fatal("an Issuer was admitted although cert-manager's webhook (failurePolicy Fail) cannot be reached")
	}
	mustContain(t, "webhook down", errOut, `failed calling webhook "webhook.cert-manager.io"`)
	// The schema is checked before the validating webhooks, as upstream.
	_, errOut, err = c.run(t, bin, "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: bad, namespace: default}\nspec: {secretName: 5}\n", "create", "--validate=false", "-f", "-")
	if err == nil {
		t.Fatal("a Certificate without issuerRef and with a numeric secretName was accepted")
	}
	mustContain(t, "schema refusal", errOut, "spec.secretName")
	c.ok(t, bin, "delete", "validatingwebhookconfiguration", "cm-cert-manager-webhook")
	c.ok(t, bin, "delete", "mutatingwebhookconfiguration", "cm-cert-manager-webhook")
	c.okIn(t, bin, issuer, "apply", "-f", "-")
	mustContain(t, "get issuers", c.ok(t, bin, "get", "issuers"), "READY", "selfsigned")
	mustContain(t, "deployments", c.ok(t, bin, "get", "deploy", "-n", "cert-manager"), "cm-cert-manager-webhook")

	helm(t, "upgrade", "cm", chart, kc, "--namespace", "cert-manager", "--set", "crds.enabled=true", "--set", "startupapicheck.enabled=false", "--set", "replicaCount=2")
	mustContain(t, "upgraded", c.ok(t, bin, "get", "deploy", "cm-cert-manager", "-n", "cert-manager", "-o", "jsonpath={.spec.replicas}"), "2")
	helm(t, "rollback", "cm", "1", kc, "--namespace", "cert-manager")
	mustContain(t, "rolled back", c.ok(t, bin, "get", "deploy", "cm-cert-manager", "-n", "cert-manager", "-o", "jsonpath={.spec.replicas}"), "1")
	mustContain(t, "history", helm(t, "history", "cm", kc, "--namespace", "cert-manager"), "Rollback to 1")
	helm(t, "uninstall", "cm", kc, "--namespace", "cert-manager", "--wait", "--timeout", "2m")
	if out, _, _ := c.run(t, bin, "", "get", "deploy", "-n", "cert-manager", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("deployments left after uninstall: %s", out)
	}
	// The chart keeps its CRDs on uninstall (helm.sh/resource-policy: keep).
	c.ok(t, bin, "get", "crd", "certificates.cert-manager.io")
}

// TestHelm_ChartWithCRDsDir_InstallsCRDsBeforeTemplates: a chart's crds/
// directory is applied before its templates, which may use the new kind.
func TestHelm_ChartWithCRDsDir_InstallsCRDsBeforeTemplates(t *testing.T) {
	c := startCluster(t)
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: widgets\nversion: 0.1.0\n",
		"crds/widget.yaml":    widgetCRD,
		"templates/mine.yaml": "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata: {name: from-chart}\nspec: {replicas: {{ .Values.replicas }}}\n",
		"values.yaml":         "replicas: 3\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kc := "--kubeconfig=" + c.kubeconfig
	helm(t, "install", "w", dir, kc, "--namespace", "default")
	bin := kubectlVersions(t)["1.27"]
	mustContain(t, "widget from the chart", c.ok(t, bin, "get", "widgets"), "from-chart", "3")
	helm(t, "upgrade", "w", dir, kc, "--namespace", "default", "--set", "replicas=5")
	mustContain(t, "upgraded widget", c.ok(t, bin, "get", "widget", "from-chart", "-o", "jsonpath={.spec.replicas}"), "5")
	helm(t, "uninstall", "w", kc, "--namespace", "default")
	if out, _, _ := c.run(t, bin, "", "get", "widgets", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("widgets left after uninstall: %s", out)
	}
}

// waitFor polls cond until it holds or the time is up.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
