package e2e

import (
	"strings"
	"testing"
	"time"
)

// widgetCRD is a namespaced CRD with a schema (a default, a CEL rule),
// printer columns, and the status and scale subresources.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.skiff.test
spec:
  group: e2e.skiff.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "!has(self.replicas) || self.replicas <= 10"
              message: "at most 10 replicas"
            properties:
              color: {type: string, enum: [red, blue], default: red}
              replicas: {type: integer, minimum: 0}
          status:
            type: object
            properties:
              replicas: {type: integer}
`

// TestCRD_Lifecycle_WithRealKubectl drives a CRD as a user would, with the
// oldest and newest kubectl: established, objects defaulted and printed
// with their columns, bad ones refused naming the field (schema and CEL),
// pruned, scaled through /scale, listed in `get all`, and deleted with
// their CRD.
func TestCRD_Lifecycle_WithRealKubectl(t *testing.T) {
	c := startCluster(t)
	for _, v := range []string{"1.27", "1.33"} {
		bin := kubectlVersions(t)[v]
		t.Run("kubectl-"+v, func(t *testing.T) {
			c.okIn(t, bin, widgetCRD, "apply", "-f", "-")
			c.ok(t, bin, "wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.e2e.skiff.test")
			waitServed(t, c, bin)
			c.okIn(t, bin, "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {replicas: 2}\n", "apply", "-f", "-")
			out := c.ok(t, bin, "get", "widgets")
			mustContain(t, "get widgets", out, "COLOR", "REPLICAS", "w1", "red")
			mustContain(t, "get wdg by short name", c.ok(t, bin, "get", "wdg", "w1", "-o", "jsonpath={.spec.color}"), "red")
			mustContain(t, "get all", c.ok(t, bin, "get", "all"), "widget.e2e.skiff.test/w1")

			_, errOut, err := c.run(t, bin, "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {color: green}\n", "create", "-f", "-")
			if err == nil {
				t.Fatal("a widget with color green (not in the enum) was accepted")
			}
			mustContain(t, "enum refusal", errOut, "spec.color", "Unsupported value")
			_, errOut, err = c.run(t, bin, "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata: {name: big}\nspec: {replicas: 11}\n", "create", "-f", "-")
			if err == nil {
				t.Fatal("a widget with 11 replicas was accepted despite its CEL rule")
			}
			mustContain(t, "CEL refusal", errOut, "spec", "at most 10 replicas")

			c.okIn(t, bin, "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {extra: 1}\n", "create", "--validate=false", "-f", "-")
			if got := c.ok(t, bin, "get", "widget", "w2", "-o", "jsonpath={.spec}"); strings.Contains(got, "extra") {
				t.Fatalf("spec.extra was not pruned: %s", got)
			}
			mustContain(t, "explain", c.ok(t, bin, "explain", "widget.spec"), "color", "replicas")
			_, errOut, err = c.run(t, bin, "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata: {name: w3}\nspec: {extra: 1}\n", "create", "--validate=strict", "-f", "-")
			if err == nil {
				t.Fatal("kubectl --validate=strict accepted spec.extra, which the schema does not declare")
			}
			mustContain(t, "strict refusal", errOut, "extra")
			c.okIn(t, bin, "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {color: blue}\n", "apply", "--server-side", "--field-manager=e2e", "--force-conflicts", "-f", "-")
			mustContain(t, "server-side apply", c.ok(t, bin, "get", "widget", "w1", "-o", "jsonpath={.spec.color}"), "blue")
			c.ok(t, bin, "scale", "widget/w1", "--replicas=4")
			mustContain(t, "scaled", c.ok(t, bin, "get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"), "4")

			c.ok(t, bin, "delete", "crd", "widgets.e2e.skiff.test", "--timeout=60s")
			if _, _, err := c.run(t, bin, "", "get", "crd", "widgets.e2e.skiff.test"); err == nil {
				t.Fatal("the CRD is still there after kubectl delete returned")
			}
			_, errOut, err = c.run(t, bin, "", "get", "--raw", "/apis/e2e.skiff.test/v1/namespaces/default/widgets")
			if err == nil || !strings.Contains(errOut, "NotFound") && !strings.Contains(errOut, "not found") {
				t.Fatalf("widgets still served after their CRD was deleted: %v %s", err, errOut)
			}
		})
	}
}

// waitServed waits until kubectl's discovery sees the widgets resource.
func waitServed(t *testing.T, c *cluster, bin string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, err := c.run(t, bin, "", "api-resources", "--api-group=e2e.skiff.test")
		if err == nil && strings.Contains(out, "widgets") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("widgets never appeared in discovery: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCRD_BadInput_RefusedNamingTheField: what a CRD or a custom object
// gets wrong is refused with the field, and nothing is half-written.
func TestCRD_BadInput_RefusedNamingTheField(t *testing.T) {
	c := startCluster(t)
	bin := kubectlVersions(t)["1.33"]
	refused := func(what, manifest string, wants ...string) {
		t.Helper()
		_, errOut, err := c.run(t, bin, manifest, "create", "--validate=false", "-f", "-")
		if err == nil {
			t.Fatalf("%s was accepted", what)
		}
		mustContain(t, what, errOut, wants...)
	}
	nonStructural := strings.Replace(widgetCRD, "              replicas: {type: integer, minimum: 0}", "              replicas: {minimum: 0}", 1)
	refused("a non-structural schema", nonStructural, "spec.validation.openAPIV3Schema.properties[spec].properties[replicas].type", "Required value")
	builtin := strings.NewReplacer("widgets.e2e.skiff.test", "ingresses.networking.k8s.io", "group: e2e.skiff.test", "group: networking.k8s.io",
		"plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]", "plural: ingresses, singular: ingress, kind: Ingress",
		"metadata:\n  name:", "metadata:\n  annotations: {api-approved.kubernetes.io: unapproved}\n  name:").Replace(widgetCRD)
	refused("a CRD taking a built-in resource", builtin, "spec.names.plural")
	if _, _, err := c.run(t, bin, "", "get", "crd", "ingresses.networking.k8s.io"); err == nil {
		t.Fatal("the refused CRD was stored")
	}
	c.okIn(t, bin, widgetCRD, "create", "-f", "-")
	refused("a duplicate CRD", widgetCRD, "AlreadyExists")
	c.ok(t, bin, "wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.e2e.skiff.test")
	waitServed(t, c, bin)
	big := "apiVersion: e2e.skiff.test/v1\nkind: Widget\nmetadata:\n  name: big\n  annotations: {blob: \"" + strings.Repeat("x", 3<<20) + "\"}\n"
	_, errOut, err := c.run(t, bin, big, "create", "--validate=false", "-f", "-")
	if err == nil || !strings.Contains(errOut, "too large") && !strings.Contains(errOut, "413") {
		t.Fatalf("a custom object over 3 MiB: err %v, stderr %s; want 413 Request Entity Too Large", err, errOut)
	}
	if out, _, _ := c.run(t, bin, "", "get", "widgets", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("widgets stored after refused creates: %s", out)
	}
}
