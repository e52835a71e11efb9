package e2e

// Admission webhooks of our own (e2e/testimages/admwebhook) running as a
// pod behind a Service, as upstream's [sig-api-machinery] AdmissionWebhook
// tests deploy theirs, and seen through the real kubectl 1.27 and 1.33: a
// validating webhook's refusal is kubectl's error and nothing is stored, a
// mutating webhook's patch is in the stored object, warnings reach
// kubectl's stderr, objects outside a webhook's selectors are never sent to
// it, a webhook slower than its timeout fails the request with a clear
// Status or, failing open, lets it through, and a server-side dry run
// reaches webhooks with dryRun set and persists nothing.
//
// One cluster serves every case. Each case has its own configuration,
// whose webhooks match only the namespaces labelled with the case's name,
// so that cases neither see each other's webhooks nor touch the cluster's
// own objects.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"skiff/e2e/testimages"
	"skiff/e2e/testimages/testpki"
)

const (
	whNS  = "admwebhook"
	whSvc = "admwebhook"
	// whCaseLabel on a namespace puts it in a case: the case's webhooks
	// select it.
	whCaseLabel = "admwebhook.skiff.test/case"
	// whMarkerLabel marks the probes by which a case waits until its
	// configuration is in force (see install).
	whMarkerLabel = "admwebhook.skiff.test/marker"
	// whDomain ends every webhook's name.
	whDomain = ".admwebhook.skiff.test"
	// What admwebhook's /mutate adds (its MutatedLabel, DryRunAnnotation).
	whMutatedLabel     = "admwebhook.skiff.test/mutated"
	whDryRunAnnotation = "admwebhook.skiff.test/dry-run"
)

var whVersions = []string{"1.27", "1.33"}

func TestWebhook_AdmissionWebhooks_CalledAsUpstream_SeenThroughRealKubectl(t *testing.T) {
	begin := time.Now()
	step := func(what string) {
		t.Logf("%s: done at %v", what, time.Since(begin).Round(time.Millisecond))
	}
	img, err := testimages.Build(t.Context(), e2eCache(t), testimages.AdmWebhook)
	if err != nil {
		t.Fatal(err)
	}
	kubectls := kubectlVersions(t)
	step("image built")

	// One node, the webhook pod bound to it, as the CRD conversion test:
	// the API server dials a pod on its own bridge.
	c := newNetCluster(t, netClusterSpec{})
	c.waitNodesReady(1, 2*time.Minute)
	ccImport(t, c, img)
	step("cluster up, image imported")

	ca := testpki.NewCA(t, "admwebhook-ca")
	certPEM, keyPEM := ccServingPair(t, ca, whSvc+"."+whNS+".svc")
	manifests := webhookPodManifests(whNS, whSvc, img.Ref, c.server.Name, certPEM, keyPEM)
	// Pod admission wants the namespace's default ServiceAccount, which
	// a controller makes a moment after the namespace.
	lcWait(t, c, time.Minute, time.Second, "webhook objects applied", func() (bool, string) {
		out, errOut, err := c.kubectlIn(manifests, "apply", "-f", "-")
		return err == nil, fmt.Sprintf("%v: %s%s", err, out, errOut)
	})
	lcWait(t, c, 2*time.Minute, time.Second, "webhook pod Ready with a ready endpoint", func() (bool, string) {
		n, eps := readyEndpointsOf(t, c, whNS, whSvc)
		return n == 1, "endpoints: " + eps
	}, func() string { return c.kubectlNoFail("describe", "pods", "-n", whNS) })
	step("webhook pod ready")

	e := &whEnv{c: c, kubectls: kubectls, caPEM: ca.PEM}
	defer func() {
		if t.Failed() {
			t.Logf("webhook log:\n%s", c.kubectlNoFail("logs", "-n", whNS, whSvc))
		}
	}()
	t.Run("ValidatingDeny_KubectlShowsWebhookMessage_NothingStored", e.testDeny)
	t.Run("MutatingPatch_InStoredObject", e.testMutate)
	t.Run("Warnings_PrintedByKubectlOnStderr", e.testWarn)
	t.Run("ObjectOutsideSelectors_NotSentToWebhook", e.testSelectors)
	t.Run("HangPastTimeout_FailPolicyRefusesWithStatus", e.testHangFail)
	t.Run("HangPastTimeout_IgnorePolicyAdmits", e.testHangIgnore)
	t.Run("ServerDryRun_WebhooksSeeDryRun_NothingPersisted", e.testDryRun)
	t.Run("SideEffectsSome_RefusedByV1Validation", e.testSideEffectsSome)
	step("cases")
}

func (e *whEnv) testDeny(t *testing.T) {
	nss := e.setup(t, "deny", "ValidatingWebhookConfiguration", whHook{name: "deny", path: "/deny"})
	for _, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			ns := nss[v]
			const by = `admission webhook "deny` + whDomain + `" denied the request: `
			errOut := e.refused(t, v, "", "create", "configmap", "denied", "-n", ns, "--from-literal=k=v")
			mustContain(t, "create configmap", errOut, by+`admwebhook refuses CREATE configmaps "denied" dryRun=false`)
			// Through create -f kubectl names the Status's reason: the
			// webhook's own 403.
			errOut = e.refused(t, v, whConfigMap("denied", nil), "create", "-n", ns, "-f", "-")
			mustContain(t, "create -f", errOut, "Error from server (Forbidden)", by+`admwebhook refuses CREATE configmaps "denied" dryRun=false`)
			// A dry run reaches a sideEffects None webhook, which is told so.
			errOut = e.refused(t, v, "", "create", "configmap", "denied", "-n", ns, "--from-literal=k=v", "--dry-run=server")
			mustContain(t, "create configmap --dry-run=server", errOut, by+`admwebhook refuses CREATE configmaps "denied" dryRun=true`)
			e.wantNotFound(t, v, ns, "denied")
		})
	}
}

func (e *whEnv) testMutate(t *testing.T) {
	nss := e.setup(t, "mutate", "MutatingWebhookConfiguration", whHook{name: "mutate", path: "/mutate"})
	for _, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			ns := nss[v]
			// Without labels the patch adds the maps; with them, the keys.
			e.ok(t, v, "", "create", "configmap", "plain", "-n", ns, "--from-literal=k=v")
			e.ok(t, v, whConfigMap("labelled", map[string]string{"app": "demo"}), "create", "-n", ns, "-f", "-")
			for name, labels := range map[string]map[string]string{
				"plain":    {whMutatedLabel: "true"},
				"labelled": {whMutatedLabel: "true", "app": "demo"},
			} {
				cm := e.getConfigMap(t, v, ns, name)
				if fmt.Sprint(cm.Labels) != fmt.Sprint(labels) || cm.Annotations[whDryRunAnnotation] != "false" || cm.Data["k"] != "v" {
					t.Errorf("stored %s: labels %v annotations %v data %v, want labels %v, %s=false and the data kept",
						name, cm.Labels, cm.Annotations, cm.Data, labels, whDryRunAnnotation)
				}
			}
		})
	}
}

func (e *whEnv) testWarn(t *testing.T) {
	nss := e.setup(t, "warn", "ValidatingWebhookConfiguration", whHook{name: "warn", path: "/warn"})
	for _, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			_, errOut := e.ok(t, v, "", "create", "configmap", "warned", "-n", nss[v], "--from-literal=k=v")
			mustContain(t, "create configmap stderr", errOut, `Warning: admwebhook saw CREATE configmaps "warned" dryRun=false`)
			e.getConfigMap(t, v, nss[v], "warned")
		})
	}
}

// testSelectors: the webhook denies all it is sent, so an object that
// passes was not sent.
func (e *whEnv) testSelectors(t *testing.T) {
	sel := map[string]string{"deny": "yes"}
	inside := e.setup(t, "selectors", "ValidatingWebhookConfiguration", whHook{name: "selected", path: "/deny", objectLabels: sel})
	outside := e.namespaces(t, "selectors-out", false)
	const by = `admission webhook "selected` + whDomain + `" denied the request: `
	for _, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			in, out := inside[v], outside[v]
			errOut := e.refused(t, v, whConfigMap("in-selected", sel), "create", "-n", in, "-f", "-")
			mustContain(t, "selected object in selected namespace", errOut, by+`admwebhook refuses CREATE configmaps "in-selected" dryRun=false`)
			e.wantNotFound(t, v, in, "in-selected")

			e.ok(t, v, whConfigMap("in-unselected", map[string]string{"deny": "no"}), "create", "-n", in, "-f", "-")
			e.ok(t, v, whConfigMap("out-selected", sel), "create", "-n", out, "-f", "-")
			e.getConfigMap(t, v, in, "in-unselected")
			e.getConfigMap(t, v, out, "out-selected")
			// An update whose new object matches the selector is sent.
			errOut = e.refused(t, v, "", "label", "--overwrite", "configmap", "in-unselected", "-n", in, "deny=yes")
			mustContain(t, "update into the selector", errOut, by+`admwebhook refuses UPDATE configmaps "in-unselected" dryRun=false`)
			if got := e.getConfigMap(t, v, in, "in-unselected").Labels["deny"]; got != "no" {
				t.Errorf("refused update stored: label deny=%q, want no", got)
			}
		})
	}
}

func (e *whEnv) testHangFail(t *testing.T) {
	nss := e.setup(t, "hang-fail", "ValidatingWebhookConfiguration",
		whHook{name: "hang", path: "/hang", failurePolicy: "Fail", timeoutSeconds: 2})
	for _, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			ns := nss[v]
			begin := time.Now()
			errOut := e.refused(t, v, whConfigMap("slow", nil), "create", "-n", ns, "-f", "-")
			t.Logf("kubectl %s create through a hanging webhook (timeoutSeconds 2, Fail): refused after %v: %s",
				v, time.Since(begin).Round(time.Millisecond), strings.TrimSpace(errOut))
			// Upstream's message: a 500 naming the webhook and the URL it
			// posted to, with the deadline the webhook was given.
			mustContain(t, "create -f", errOut, "Error from server (InternalError)",
				`Internal error occurred: failed calling webhook "hang`+whDomain+`": failed to call webhook: Post "https://`+whSvc+"."+whNS+`.svc:443/hang?timeout=2s": context deadline exceeded`)
			e.wantNotFound(t, v, ns, "slow")
		})
	}
}

func (e *whEnv) testHangIgnore(t *testing.T) {
	nss := e.setup(t, "hang-ignore", "ValidatingWebhookConfiguration",
		whHook{name: "hang", path: "/hang", failurePolicy: "Ignore", timeoutSeconds: 2})
	for _, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			begin := time.Now()
			e.ok(t, v, "", "create", "configmap", "slow", "-n", nss[v], "--from-literal=k=v")
			t.Logf("kubectl %s create through a hanging webhook (timeoutSeconds 2, Ignore): admitted after %v",
				v, time.Since(begin).Round(time.Millisecond))
			e.getConfigMap(t, v, nss[v], "slow")
		})
	}
}

func (e *whEnv) testDryRun(t *testing.T) {
	nss := e.setup(t, "dry-run", "MutatingWebhookConfiguration",
		whHook{name: "mutate", path: "/mutate", sideEffects: "NoneOnDryRun"},
		whHook{name: "warn", path: "/warn", sideEffects: "None"})
	for _, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			ns := nss[v]
			out, errOut := e.ok(t, v, "", "create", "configmap", "dry", "-n", ns, "--from-literal=k=v", "--dry-run=server", "-o", "json")
			mustContain(t, "create --dry-run=server stderr", errOut, `Warning: admwebhook saw CREATE configmaps "dry" dryRun=true`)
			// The answer is the object as it would be stored: patched by
			// a webhook that knew it was a dry run.
			var cm corev1.ConfigMap
			if err := json.Unmarshal([]byte(out), &cm); err != nil {
				t.Fatalf("decode the dry run's answer: %v: %s", err, out)
			}
			if cm.Labels[whMutatedLabel] != "true" || cm.Annotations[whDryRunAnnotation] != "true" {
				t.Errorf("dry run answer: labels %v annotations %v, want %s=true and %s=true", cm.Labels, cm.Annotations, whMutatedLabel, whDryRunAnnotation)
			}
			e.wantNotFound(t, v, ns, "dry")
			// The same create for real: the webhook is told it is not.
			e.ok(t, v, "", "create", "configmap", "dry", "-n", ns, "--from-literal=k=v")
			if got := e.getConfigMap(t, v, ns, "dry").Annotations[whDryRunAnnotation]; got != "false" {
				t.Errorf("stored after a real create: %s=%q, want false", whDryRunAnnotation, got)
			}
		})
	}
}

// testSideEffectsSome: admissionregistration/v1 knows only webhooks
// without side effects (None, NoneOnDryRun), so a dry run can never reach
// one that has them: Some and Unknown are refused when the configuration
// is written. Each kubectl version writes one of the two classes.
func (e *whEnv) testSideEffectsSome(t *testing.T) {
	for i, v := range whVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			class := []string{"Some", "Unknown"}[i]
			cfg := e.config("ValidatingWebhookConfiguration", "wh-side-effects", "side-effects", whHook{name: "some", path: "/allow", sideEffects: class})
			errOut := e.refused(t, v, cfg, "create", "-f", "-")
			mustContain(t, "create a configuration with sideEffects "+class, errOut,
				`webhooks[1].sideEffects: Unsupported value: "`+class+`": supported values: "None", "NoneOnDryRun"`)
			if _, _, err := e.run(v, "", "get", "validatingwebhookconfiguration", "wh-side-effects"); err == nil {
				t.Fatal("the refused configuration was stored")
			}
		})
	}
}
