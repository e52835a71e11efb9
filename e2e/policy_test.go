package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const replicasPolicyYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas-%[1]s}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= int(params.data.maxReplicas)
    messageExpression: "'replicas ' + string(object.spec.replicas) + ' exceed the limit of ' + params.data.maxReplicas"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas-%[1]s}
spec:
  policyName: max-replicas-%[1]s
  validationActions: [%[2]s]
  paramRef: {name: limits, namespace: %[1]s, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
`

// TestValidatingAdmissionPolicy_ParamConfigMap_DeniesThenWarns: a policy
// whose limit is a param ConfigMap refuses a Deployment over it with its
// messageExpression; bound with Warn instead, the same Deployment is
// admitted and kubectl prints the warning.
func TestValidatingAdmissionPolicy_ParamConfigMap_DeniesThenWarns(t *testing.T) {
	c := startCluster(t)
	for _, v := range []string{"1.27", "1.33"} {
		bin := kubectlVersions(t)[v]
		t.Run("kubectl-"+v, func(t *testing.T) {
			ns := "vap" + strings.ReplaceAll(v, ".", "")
			c.ok(t, bin, "create", "namespace", ns)
			c.ok(t, bin, "create", "configmap", "limits", "-n", ns, "--from-literal=maxReplicas=3")
			c.okIn(t, bin, fmt.Sprintf(replicasPolicyYAML, ns, "Deny"), "apply", "-f", "-")
			// The policy applies once the watch cache has it: retry until
			// the refusal comes (bounded), then check it word for word.
			var errOut string
			deadline := time.Now().Add(15 * time.Second)
			for {
				var err error
				_, errOut, err = c.run(t, bin, "", "create", "deployment", "big", "-n", ns, "--image=busybox", "--replicas=5")
				if err != nil || time.Now().After(deadline) {
					break
				}
				c.ok(t, bin, "delete", "deployment", "big", "-n", ns)
				time.Sleep(200 * time.Millisecond)
			}
			mustContain(t, "deny", errOut, `deployments.apps "big" is forbidden: ValidatingAdmissionPolicy 'max-replicas-`+ns+`' with binding 'max-replicas-`+ns+`' denied request: replicas 5 exceed the limit of 3`)
			if out, _, _ := c.run(t, bin, "", "get", "deployments", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
				t.Fatalf("a refused deployment was stored: %s", out)
			}
			c.ok(t, bin, "create", "deployment", "small", "-n", ns, "--image=busybox", "--replicas=2")

			c.okIn(t, bin, fmt.Sprintf(replicasPolicyYAML, ns, "Warn"), "apply", "-f", "-")
			deadline = time.Now().Add(15 * time.Second)
			for {
				_, errOut, _ = c.run(t, bin, "", "scale", "deployment", "small", "-n", ns, "--replicas=6")
				if strings.Contains(errOut, "Warning:") || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			mustContain(t, "warn", errOut, `Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas-`+ns+`' with binding 'max-replicas-`+ns+`': replicas 6 exceed the limit of 3`)
			if got := c.ok(t, bin, "get", "deployment", "small", "-n", ns, "-o", "jsonpath={.spec.replicas}"); strings.TrimSpace(got) != "6" {
				t.Fatalf("warned update not admitted: replicas %q", got)
			}
		})
	}
}

const mutatingPolicyYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: defaults-%[1]s}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  matchConditions:
  - name: unlabelled
    expression: "!has(object.metadata.labels) || !('team' in object.metadata.labels)"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"team": "platform"}},
               spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
                 containers: object.spec.template.spec.containers.map(c, Object.spec.template.spec.containers{name: c.name, imagePullPolicy: "IfNotPresent"})}}}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/annotations", value: {}},
         JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("example.com/mutated"), value: "yes"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: defaults-%[1]s}
spec:
  policyName: defaults-%[1]s
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
`

// TestMutatingAdmissionPolicy_ApplyConfigurationAndJSONPatch_StoredAsMutated:
// a MutatingAdmissionPolicy applied with the real kubectl mutates the
// Deployments its binding selects (an apply configuration merged by the
// schema, a JSON Patch), leaves other namespaces' alone, is listed with
// upstream's columns, and a bad one is refused naming the field.
func TestMutatingAdmissionPolicy_ApplyConfigurationAndJSONPatch_StoredAsMutated(t *testing.T) {
	c := startCluster(t)
	for _, v := range []string{"1.27", "1.33"} {
		bin := kubectlVersions(t)[v]
		t.Run("kubectl-"+v, func(t *testing.T) {
			ns := "map" + strings.ReplaceAll(v, ".", "")
			c.ok(t, bin, "create", "namespace", ns)
			c.ok(t, bin, "create", "namespace", ns+"-other")
			c.okIn(t, bin, fmt.Sprintf(mutatingPolicyYAML, ns), "apply", "-f", "-")
			list := c.ok(t, bin, "get", "mutatingadmissionpolicies", "defaults-"+ns)
			mustContain(t, "columns", list, "NAME", "MUTATIONS", "PARAMKIND", "defaults-"+ns, "<unset>")

			jsonpath := `jsonpath={.metadata.labels.team}/{.metadata.annotations.example\.com/mutated}/{.spec.template.spec.containers[0].imagePullPolicy}`
			var got string
			deadline := time.Now().Add(15 * time.Second)
			for i := 0; ; i++ {
				name := fmt.Sprintf("web%d", i)
				c.ok(t, bin, "create", "deployment", name, "-n", ns, "--image=busybox")
				got = strings.TrimSpace(c.ok(t, bin, "get", "deployment", name, "-n", ns, "-o", jsonpath))
				if got == "platform/yes/IfNotPresent" || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if got != "platform/yes/IfNotPresent" {
				t.Fatalf("stored deployment: team/annotation/pullPolicy = %q, want platform/yes/IfNotPresent", got)
			}
			c.ok(t, bin, "create", "deployment", "web", "-n", ns+"-other", "--image=busybox")
			if other := strings.TrimSpace(c.ok(t, bin, "get", "deployment", "web", "-n", ns+"-other", "-o", jsonpath)); other != "//Always" {
				t.Fatalf("deployment outside the binding's namespaces mutated: %q", other)
			}

			bad := strings.Replace(fmt.Sprintf(mutatingPolicyYAML, ns+"-bad"), "reinvocationPolicy: Never", "reinvocationPolicy: Sometimes", 1)
			_, errOut, err := c.run(t, bin, bad, "apply", "-f", "-")
			if err == nil {
				t.Fatal("a policy with an unsupported reinvocationPolicy was accepted")
			}
			mustContain(t, "bad policy", errOut, `spec.reinvocationPolicy: Unsupported value: "Sometimes"`)
		})
	}
}
