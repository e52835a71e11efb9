package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// The ingress-nginx chart 4.11.0 (controller 1.11.0), from the Go module
// proxy: the module's newest pseudo-version, as the proxy refuses the
// repository's tags (they are not semantic module versions).
const (
	ingressNginxModule  = "k8s.io/ingress-nginx"
	ingressNginxVersion = "v0.0.0-20240708192948-52c50467d67d"
	ingressNginxChartV  = "4.11.0"
)

var (
	ingressChartOnce sync.Once
	ingressChartDir  string
	ingressChartErr  error
)

// ingressNginxChart is charts/ingress-nginx of the module, whose
// Chart.yaml already names the release (version and appVersion).
func ingressNginxChart(t *testing.T) string {
	t.Helper()
	ingressChartOnce.Do(func() {
		ingressChartDir, ingressChartErr = chartFromModule(e2eCache(t), moduleChart{
			module: ingressNginxModule, version: ingressNginxVersion,
			dir: "charts/ingress-nginx", name: "ingress-nginx-" + ingressNginxChartV,
		})
	})
	if ingressChartErr != nil {
		t.Fatalf("ingress-nginx chart: %v", ingressChartErr)
	}
	return ingressChartDir
}

// TestHelm_IngressNginx_AdmissionWebhookDown_RefusesIngressUntilIgnored
// installs the real ingress-nginx chart without its hooks (the Jobs that
// make the webhook's certificate and patch its caBundle): its controller
// pods never become ready here, so the admission Service has no ready
// endpoint, as on a real cluster whose controller is down. The chart's
// webhook (failurePolicy Fail) then refuses every Ingress with upstream's
// message, and lets them through once its policy is Ignore.
func TestHelm_IngressNginx_AdmissionWebhookDown_RefusesIngressUntilIgnored(t *testing.T) {
	c := startCluster(t)
	chart := ingressNginxChart(t)
	kc := "--kubeconfig=" + c.kubeconfig
	const (
		ns   = "ingress-nginx"
		vwc  = "ingress-nginx-admission"
		hook = "validate.nginx.ingress.kubernetes.io"
	)
	// The admission webhook stays enabled (the chart's default).
	helm(t, "install", "ingress-nginx", chart, kc, "--no-hooks", "-n", ns, "--create-namespace",
		"--set", "controller.admissionWebhooks.enabled=true", "--timeout", "2m")
	mustContain(t, "helm status", helm(t, "status", "ingress-nginx", kc, "-n", ns), "STATUS: deployed")

	bins := kubectlVersions(t)
	bin := bins["1.33"]
	mustContain(t, "chart objects",
		c.ok(t, bin, "get", "deploy,svc,ingressclass,cm,sa", "-n", ns, "-o", "name"),
		"deployment.apps/ingress-nginx-controller", "service/ingress-nginx-controller-admission",
		"service/ingress-nginx-controller\n", "ingressclass.networking.k8s.io/nginx", "serviceaccount/ingress-nginx")
	// The webhook as the chart renders it: Fail, to the admission
	// Service, and (the patch hook not run) no caBundle.
	got := c.ok(t, bin, "get", "validatingwebhookconfiguration", vwc, "-o",
		`jsonpath={.webhooks[0].name} {.webhooks[0].failurePolicy} {.webhooks[0].timeoutSeconds} `+
			`{.webhooks[0].clientConfig.service.namespace}/{.webhooks[0].clientConfig.service.name}:{.webhooks[0].clientConfig.service.port}`+
			`{.webhooks[0].clientConfig.service.path} ca={.webhooks[0].clientConfig.caBundle}`)
	if want := hook + " Fail 10 ingress-nginx/ingress-nginx-controller-admission:443/networking/v1/ingresses ca="; got != want {
		t.Fatalf("webhook configuration:\n got %q\nwant %q", got, want)
	}
	// Upstream resolves the Service to a ready endpoint before any TLS,
	// so an unready controller reads the same with or without a caBundle.
	want := `Internal error occurred: failed calling webhook "` + hook + `": failed to call webhook: ` +
		`Post "https://ingress-nginx-controller-admission.ingress-nginx.svc:443/networking/v1/ingresses?timeout=10s": ` +
		`no endpoints available for service "ingress-nginx-controller-admission"`
	for _, v := range []string{"1.27", "1.33"} {
		_, errOut, err := c.run(t, bins[v], "", "create", "ingress", "demo-"+strings.ReplaceAll(v, ".", ""),
			"-n", "default", "--class=nginx", "--rule=demo.example.com/*=demo:80")
		if err == nil {
			t.Fatalf("kubectl %s: an Ingress was admitted although the webhook (failurePolicy Fail) has no endpoint", v)
		}
		t.Logf("kubectl %s create ingress: %s", v, strings.TrimSpace(errOut))
		mustContain(t, "kubectl "+v+" create ingress", errOut, want)
	}
	if out := c.ok(t, bin, "get", "ingress", "-A", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("an Ingress refused by the webhook was stored: %s", out)
	}

	// The failure policy is what refused them: with Ignore the same
	// unreachable webhook lets Ingresses through.
	c.ok(t, bin, "patch", "validatingwebhookconfiguration", vwc, "--type=json",
		"-p", `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`)
	for _, v := range []string{"1.27", "1.33"} {
		name := "demo-" + strings.ReplaceAll(v, ".", "")
		// The webhook plugin reads configurations from the watch cache:
		// the patch is seen a moment later.
		var last string
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, errOut, err := c.run(t, bins[v], "", "create", "ingress", name,
				"-n", "default", "--class=nginx", "--rule=demo.example.com/*=demo:80")
			if err == nil {
				break
			}
			if last = errOut; time.Now().After(deadline) {
				t.Fatalf("kubectl %s create ingress with failurePolicy Ignore: %v\n%s", v, err, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
		mustContain(t, "stored ingress", c.ok(t, bins[v], "get", "ingress", name, "-n", "default", "-o",
			"jsonpath={.spec.ingressClassName} {.spec.rules[0].host}"), "nginx demo.example.com")
	}

	helm(t, "uninstall", "ingress-nginx", kc, "-n", ns, "--wait", "--timeout", "2m")
	if out, _, _ := c.run(t, bin, "", "get", "validatingwebhookconfiguration", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("webhook configurations left after uninstall: %s", out)
	}
	if out, _, _ := c.run(t, bin, "", "get", "deploy,svc", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("objects left after uninstall: %s", out)
	}
	// Without the webhook an Ingress is admitted at once.
	c.ok(t, bin, "create", "ingress", "after", "-n", "default", "--class=nginx", "--rule=after.example.com/*=demo:80")
}
