package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

func TestHelm_Version_IsThePinnedRelease(t *testing.T) {
	out := helm(t, "version", "--short")
	if !strings.HasPrefix(strings.TrimSpace(out), helmVersion) {
		t.Errorf("helm version --short = %q, want %s", out, helmVersion)
	}
	// What `helm template` assumes of the cluster without one.
	caps := helm(t, "template", "caps", writeChart(t, "{{ .Capabilities.KubeVersion.Version }}"))
	if !strings.Contains(caps, "v1."+helmKubeMinor+".0") {
		t.Errorf("helm's default KubeVersion: %q, want v1.%s.0", caps, helmKubeMinor)
	}
}

// writeChart makes a one-template chart whose template is tmpl.
func writeChart(t *testing.T, tmpl string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: caps\nversion: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"), []byte("# "+tmpl+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The cert-manager chart from its module renders offline with its CRDs,
// and its images carry the release's tag, not the source's v0.0.0.
func TestHelm_TemplateCertManager_RendersCRDsAndReleaseImages(t *testing.T) {
	chart := certManagerChart(t)
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "Chart.yaml", string(b), "version: "+certManagerVersion, "appVersion: "+certManagerVersion)

	out := helm(t, "template", "cert-manager", chart, "--namespace", "cert-manager", "--set", "crds.enabled=true")
	crdName := regexp.MustCompile(`(?m)^kind: CustomResourceDefinition\nmetadata:\n  name: "?([a-z.-]+)"?`)
	var crds []string
	for _, m := range crdName.FindAllStringSubmatch(out, -1) {
		crds = append(crds, m[1])
	}
	sort.Strings(crds)
	want := []string{
		"certificaterequests.cert-manager.io", "certificates.cert-manager.io", "challenges.acme.cert-manager.io",
		"clusterissuers.cert-manager.io", "issuers.cert-manager.io", "orders.acme.cert-manager.io",
	}
	if strings.Join(crds, ",") != strings.Join(want, ",") {
		t.Errorf("rendered CRDs %v, want %v", crds, want)
	}
	mustContain(t, "helm template", out,
		"image: \"quay.io/jetstack/cert-manager-controller:"+certManagerVersion+"\"",
		"image: \"quay.io/jetstack/cert-manager-webhook:"+certManagerVersion+"\"",
		"image: \"quay.io/jetstack/cert-manager-cainjector:"+certManagerVersion+"\"",
		"kind: MutatingWebhookConfiguration", "kind: ValidatingWebhookConfiguration")

	// Without crds.enabled the chart leaves the CRDs out.
	if out := helm(t, "template", "cert-manager", chart, "--namespace", "cert-manager"); strings.Contains(out, "kind: CustomResourceDefinition") {
		t.Error("helm template without crds.enabled rendered CRDs")
	}
}
