package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const auditPolicyYAML = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted]
rules:
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  namespaces: [audit-e2e]
- level: Metadata
  resources: [{group: apps, resources: [deployments]}]
  verbs: [create]
- level: None
`

const auditVAPYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: few-replicas}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 1
    messageExpression: "'replicas ' + string(object.spec.replicas) + ' over 1'"
  auditAnnotations:
  - key: replicas
    valueExpression: string(object.spec.replicas)
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: few-replicas-audit}
spec:
  policyName: few-replicas
  validationActions: [Audit]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: audit-e2e}}
`

// auditEvent is the part of an audit.k8s.io/v1 Event these tests read,
// decoded from the log as any log reader would.
type auditEvent struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Level      string `json:"level"`
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	SourceIPs []string `json:"sourceIPs"`
	ObjectRef *struct {
		Resource, Namespace, Name, APIGroup, APIVersion string
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage   `json:"requestObject"`
	ResponseObject json.RawMessage   `json:"responseObject"`
	Annotations    map[string]string `json:"annotations"`
}

// readAuditLog decodes every line of the log; a line that is not an event
// fails the test.
func readAuditLog(t *testing.T, path string) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" {
			t.Fatalf("audit log line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// findEvent polls the log (bounded) for the event match accepts.
func findEvent(t *testing.T, path string, what string, match func(auditEvent) bool) auditEvent {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, ev := range readAuditLog(t, path) {
			if match(ev) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit event for %s in %s", what, path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func refersTo(ev auditEvent, resource, ns, name string) bool {
	r := ev.ObjectRef
	return r != nil && r.Resource == resource && r.Namespace == ns && r.Name == name
}

// TestAudit_KubectlRequests_LoggedAsThePolicySays: a server started with
// an audit policy logs kubectl's ConfigMap create with its user, object
// reference and bodies at RequestResponse; a ValidatingAdmissionPolicy
// bound with [Audit] admits a Deployment it fails and annotates that
// request's event; after a clean stop the whole log is JSON events.
func TestAudit_KubectlRequests_LoggedAsThePolicySays(t *testing.T) {
	dataDir := t.TempDir()
	policy := filepath.Join(t.TempDir(), "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dataDir, "audit", "audit.log")
	port := freePort(t)
	p := start(t, "server", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--https-listen-port", strconv.Itoa(port),
		"--write-kubeconfig", filepath.Join(dataDir, "kubeconfig.yaml"),
		"--audit-policy-file", policy, "--audit-log-path", logPath, "--audit-log-maxsize", "50", "--audit-log-maxbackup", "2")
	waitHealthy(t, p, port)
	c := &cluster{proc: p, kubeconfig: filepath.Join(dataDir, "kubeconfig.yaml"), dataDir: dataDir}
	bin := kubectlVersions(t)["default"]

	c.ok(t, bin, "create", "namespace", "audit-e2e")
	c.ok(t, bin, "create", "configmap", "cm1", "-n", "audit-e2e", "--from-literal=colour=blue")
	done := findEvent(t, logPath, "the configmap create", func(ev auditEvent) bool {
		return ev.Stage == "ResponseComplete" && ev.Verb == "create" && refersTo(ev, "configmaps", "audit-e2e", "cm1")
	})
	if done.Level != "RequestResponse" || done.User.Username != "system:admin" || !containsString(done.User.Groups, "system:masters") ||
		!strings.HasPrefix(done.UserAgent, "kubectl") || len(done.SourceIPs) == 0 || done.ObjectRef.APIVersion != "v1" {
		t.Errorf("configmap event %+v", done)
	}
	if done.ResponseStatus == nil || done.ResponseStatus.Code != 201 || done.Annotations["authorization.k8s.io/decision"] != "allow" {
		t.Errorf("configmap event status %+v, annotations %v", done.ResponseStatus, done.Annotations)
	}
	mustContain(t, "requestObject", string(done.RequestObject), `"colour":"blue"`)
	mustContain(t, "responseObject", string(done.ResponseObject), `"uid":`, `"resourceVersion":`)
	recv := findEvent(t, logPath, "the configmap create's RequestReceived", func(ev auditEvent) bool {
		return ev.AuditID == done.AuditID && ev.Stage == "RequestReceived"
	})
	if recv.RequestObject != nil || recv.Verb != "create" {
		t.Errorf("RequestReceived %+v", recv)
	}

	c.okIn(t, bin, auditVAPYAML, "apply", "-f", "-")
	// The binding applies once the watch cache has it: create until a
	// create's event carries the failure (bounded), then check it.
	var failed auditEvent
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		name := fmt.Sprintf("big%d", i)
		c.ok(t, bin, "create", "deployment", name, "-n", "audit-e2e", "--image=busybox", "--replicas=3")
		ev := findEvent(t, logPath, "deployment "+name, func(ev auditEvent) bool {
			return ev.Stage == "ResponseComplete" && refersTo(ev, "deployments", "audit-e2e", name)
		})
		if ev.Annotations["validation.policy.admission.k8s.io/validation_failure"] != "" {
			failed = ev
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no deployment create was annotated by the Audit binding; last event %+v", ev)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("audited deployment %s/%s: annotations %v", failed.ObjectRef.Namespace, failed.ObjectRef.Name, failed.Annotations)
	if failed.ResponseStatus == nil || failed.ResponseStatus.Code != 201 || failed.Level != "Metadata" || failed.RequestObject != nil {
		t.Errorf("audited deployment event %+v: want an admitted create at Metadata", failed)
	}
	var failures []struct {
		Message, Policy, Binding string
		ExpressionIndex          int
		ValidationActions        []string
	}
	if err := json.Unmarshal([]byte(failed.Annotations["validation.policy.admission.k8s.io/validation_failure"]), &failures); err != nil {
		t.Fatal(err)
	}
	if len(failures) != 1 || failures[0].Message != "replicas 3 over 1" || failures[0].Policy != "few-replicas" ||
		failures[0].Binding != "few-replicas-audit" || failures[0].ExpressionIndex != 0 || strings.Join(failures[0].ValidationActions, ",") != "Audit" {
		t.Errorf("validation_failure %+v", failures)
	}
	if got := failed.Annotations["few-replicas/replicas"]; got != "3" {
		t.Errorf("few-replicas/replicas = %q, want 3 (annotations %v)", got, failed.Annotations)
	}
	name := failed.ObjectRef.Name
	if got := c.ok(t, bin, "get", "deployment", name, "-n", "audit-e2e", "-o", "jsonpath={.spec.replicas}"); strings.TrimSpace(got) != "3" {
		t.Errorf("the audited deployment was not stored as sent: replicas %q", got)
	}

	if err := p.stop(t, syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	evs := readAuditLog(t, logPath)
	stages := map[string]int{}
	for _, ev := range evs {
		stages[ev.Stage]++
		if ev.ObjectRef != nil && ev.ObjectRef.Resource == "deployments" && ev.Verb != "create" {
			t.Errorf("a deployment %s was logged though only creates are: %+v", ev.Verb, ev)
		}
	}
	t.Logf("%d events after a clean stop: %v", len(evs), stages)
	if stages["ResponseStarted"] != 0 {
		t.Errorf("ResponseStarted was logged though the policy omits it")
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestAudit_BadPolicyFile_ServerRefusesToStart: a policy with an unknown
// level stops the server at start, the error naming the field.
func TestAudit_BadPolicyFile_ServerRefusesToStart(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	p := start(t, "server", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--https-listen-port", strconv.Itoa(freePort(t)),
		"--write-kubeconfig", filepath.Join(dataDir, "kubeconfig.yaml"),
		"--audit-policy-file", policy, "--audit-log-path", filepath.Join(dataDir, "audit.log"))
	err := p.wait(t, 60*time.Second)
	if err == nil || !strings.Contains(p.output(), "--audit-policy-file") || !strings.Contains(p.output(), `rules[0].level: Unsupported value: "Everything"`) {
		t.Fatalf("exit %v, output:\n%s\nwant a failure naming rules[0].level", exitCode(err), p.output())
	}
}
