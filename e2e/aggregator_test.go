package e2e

// Aggregated APIs through skiff, as upstream's [sig-api-machinery]
// Aggregator test deploys its sample-apiserver: skiff's own extension API
// server (e2e/testimages/extapi) runs as a pod behind a Service and an
// APIService; the API server proxies its group with the caller's identity
// vouched for by the front-proxy certificate, lists it in discovery, and
// when the server goes away fails that group alone. Then the real
// metrics-server Helm chart, whose APIService is registered but whose
// pods never run here.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/e2e/testimages"
	"skiff/e2e/testimages/testpki"
)

func TestAggregator_ExtensionServer_ProxiedWithCallerIdentity_UnavailableFailsOnlyItsGroup(t *testing.T) {
	begin := time.Now()
	step := func(what string) {
		t.Logf("%s: done at %v", what, time.Since(begin).Round(time.Millisecond))
	}
	img, err := testimages.Build(t.Context(), e2eCache(t), testimages.ExtAPI)
	if err != nil {
		t.Fatal(err)
	}
	kubectls := kubectlVersions(t)
	step("image built")

	c := newNetCluster(t, netClusterSpec{})
	c.waitNodesReady(1, 2*time.Minute)
	ccImport(t, c, img)
	step("cluster up, image imported")
	// A discovery cache of our own: kubectl's default one outlives the
	// cluster and could answer for a server it never asked.
	cacheDir := t.TempDir()
	kc := func(t *testing.T, v string, args ...string) string {
		t.Helper()
		return svcKubectl(t, c, kubectls[v], append([]string{"--cache-dir", cacheDir}, args...)...)
	}
	kcRun := func(v string, args ...string) func() (string, string, error) {
		return func() (string, string, error) {
			return c.kubectlBinIn(kubectls[v], "", append([]string{"--cache-dir", cacheDir}, args...)...)
		}
	}
	apiService := func() (*apiregistrationv1.APIServiceCondition, string) {
		return agCondition(t, lcKubectl(t, c, "get", "apiservice", agAPISvc, "-o", "json"))
	}

	ca := testpki.NewCA(t, "extapi-ca")
	certPEM, keyPEM := ccServingPair(t, ca, agSvc+"."+agNS+".svc")
	lcWait(t, c, time.Minute, time.Second, "extension server objects applied", func() (bool, string) {
		out, errOut, err := c.kubectlIn(agManifests(img.Ref, c.server.Name, certPEM, keyPEM), "apply", "-f", "-")
		return err == nil, fmt.Sprintf("%v: %s%s", err, out, errOut)
	})
	agWaitEndpoints(t, c, 1, 2*time.Minute)
	step("extension server ready")

	lcApply(t, c, agAPIService(ca.PEM))
	lcApply(t, c, agAliceRBAC)
	lcWait(t, c, time.Minute, 500*time.Millisecond, "APIService Available=True", func() (bool, string) {
		cond, status := apiService()
		return cond != nil && cond.Status == apiregistrationv1.ConditionTrue && cond.Reason == "Passed", status
	}, func() string { return c.kubectlNoFail("logs", "-n", agNS, "deploy/"+agSvc) })
	step("APIService available")

	// Discovery is fetched once the APIService is available: a moment.
	for _, v := range []string{"1.27", "1.33"} {
		lcWait(t, c, 30*time.Second, 500*time.Millisecond, "kubectl "+v+" api-resources lists flunders", func() (bool, string) {
			out, errOut, err := kcRun(v, "api-resources", "--api-group="+agGroup)()
			return err == nil && strings.Contains(out, "flunders"), fmt.Sprintf("%v: %s%s", err, out, errOut)
		})
	}
	step("in discovery")

	t.Run("Discovery_ListsTheGroup", func(t *testing.T) {
		for _, v := range []string{"1.27", "1.33"} {
			out := agAPIResources(t, "kubectl "+v+" api-resources", kcRun(v, "api-resources"),
				[]string{"flunders", "pods", "deployments", "apiservices"})
			mustContain(t, "kubectl "+v+" api-resources", out, agGroup+"/"+agVersion)
			mustContain(t, "kubectl "+v+" get --raw /apis", kc(t, v, "get", "--raw", "/apis"), `"name":"`+agGroup+`"`)
		}
		var rl struct {
			GroupVersion string
			Resources    []struct{ Name, Kind string } `json:"resources"`
		}
		raw := kc(t, "1.33", "get", "--raw", "/apis/"+agGroup+"/"+agVersion)
		if err := json.Unmarshal([]byte(raw), &rl); err != nil || rl.GroupVersion != agGroup+"/"+agVersion ||
			len(rl.Resources) != 1 || rl.Resources[0].Name != "flunders" {
			t.Fatalf("GET /apis/%s/%s: %s (%v), want the flunders resource list", agGroup, agVersion, raw, err)
		}
	})

	t.Run("KubectlGetFlunders_ProxiedToTheServer", func(t *testing.T) {
		for _, v := range []string{"1.27", "1.33"} {
			out := kc(t, v, "get", "flunders", "-n", agNS)
			mustContain(t, "kubectl "+v+" get flunders", out, "NAME", "flunder-a", "flunder-b")
			names := kc(t, v, "get", "flunders."+agGroup, "-n", agNS, "-o", "jsonpath={.items[*].metadata.name}")
			if names != "flunder-a flunder-b" {
				t.Errorf("kubectl %s get flunders -o jsonpath: %q, want flunder-a flunder-b", v, names)
			}
		}
	})

	t.Run("ImpersonatedUser_ReachesTheServerAsThatUser", func(t *testing.T) {
		for _, v := range []string{"1.27", "1.33"} {
			out := kc(t, v, "--as=alice", "--as-group=devs", "--as-uid=alice-uid",
				"get", "flunder", "flunder-a", "-n", agNS, "-o", "json")
			var f struct {
				Status struct{ Caller authenticationv1.UserInfo } `json:"status"`
			}
			if err := json.Unmarshal([]byte(out), &f); err != nil {
				t.Fatalf("decode flunder: %v: %s", err, out)
			}
			got := f.Status.Caller
			groups := slices.Sorted(slices.Values(got.Groups))
			if got.Username != "alice" || got.UID != "alice-uid" || !slices.Equal(groups, []string{"devs", "system:authenticated"}) {
				t.Errorf("kubectl %s --as=alice: the server saw %s, want alice (uid alice-uid) in exactly devs and system:authenticated", v, lcJSON(got))
			}
		}
		// Authorization is the API server's, before any proxying: bob has
		// no rule for flunders.
		out, errOut, err := kcRun("1.33", "--as=bob", "get", "flunders", "-n", agNS)()
		if err == nil || !strings.Contains(errOut, "forbidden") || !strings.Contains(errOut, `User "bob"`) {
			t.Errorf("kubectl --as=bob get flunders: %v %s%s, want Forbidden for bob", err, out, errOut)
		}
	})

	t.Run("ClientIdentityHeaders_NotPassedThrough", func(t *testing.T) {
		// X-Remote-* headers from the client must be replaced, never
		// forwarded: the front-proxy certificate vouches for them.
		rc := c.restConfig()
		rc.Impersonate.UserName = "carol"
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("X-Remote-User", "mallory")
				r.Header.Add("X-Remote-Group", "system:masters")
				r.Header.Set("X-Remote-Extra-Scopes", "all")
				return rt.RoundTrip(r)
			})
		})
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		// carol may not read flunders: the forged headers must not help.
		code, body := agRaw(t, cs, "/apis/"+agGroup+"/"+agVersion+"/namespaces/"+agNS+"/flunders/flunder-a")
		if code != 403 {
			t.Fatalf("carol with forged X-Remote-* headers: %d %s, want 403 from the API server", code, body)
		}
		lcApply(t, c, strings.ReplaceAll(strings.ReplaceAll(agAliceRBAC, "alice", "carol"), "flunder-reader}", "flunder-reader-carol}"))
		lcWait(t, c, 10*time.Second, 200*time.Millisecond, "carol reads flunder-a", func() (bool, string) {
			code, body = agRaw(t, cs, "/apis/"+agGroup+"/"+agVersion+"/namespaces/"+agNS+"/flunders/flunder-a")
			return code == 200, fmt.Sprintf("%d %s", code, body)
		})
		var f struct {
			Status struct{ Caller authenticationv1.UserInfo } `json:"status"`
		}
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			t.Fatalf("decode flunder: %v: %s", err, body)
		}
		got := f.Status.Caller
		if got.Username != "carol" || slices.Contains(got.Groups, "system:masters") || len(got.Extra) != 0 {
			t.Errorf("with forged headers the server saw %s, want carol without system:masters or extra", lcJSON(got))
		}
	})
	step("proxied")

	t.Run("ServerGone_OnlyItsGroupFails", func(t *testing.T) {
		gone := time.Now()
		lcKubectl(t, c, "scale", "deployment", agSvc, "-n", agNS, "--replicas=0")
		agWaitEndpoints(t, c, 0, time.Minute)
		var cond *apiregistrationv1.APIServiceCondition
		lcWait(t, c, time.Minute, 500*time.Millisecond, "APIService Available=False", func() (bool, string) {
			var status string
			cond, status = apiService()
			return cond != nil && cond.Status == apiregistrationv1.ConditionFalse, status
		})
		t.Logf("Available=False %v after the scale-down: reason %s: %s", time.Since(gone).Round(time.Millisecond), cond.Reason, cond.Message)
		if cond.Reason != "MissingEndpoints" && cond.Reason != "FailedDiscoveryCheck" {
			t.Errorf("Available=False with reason %q, want MissingEndpoints or FailedDiscoveryCheck", cond.Reason)
		}
		if cond.Message == "" {
			t.Error("Available=False without a message")
		}

		cs := c.clientset()
		code, body := agRaw(t, cs, "/apis/"+agGroup+"/"+agVersion)
		agWantServiceUnavailable(t, "GET /apis/"+agGroup+"/"+agVersion, code, body)
		code, body = agRaw(t, cs, "/apis/"+agGroup+"/"+agVersion+"/namespaces/"+agNS+"/flunders")
		agWantServiceUnavailable(t, "list flunders", code, body)

		for _, v := range []string{"1.27", "1.33"} {
			// No pod is left to list; the call must still succeed.
			kc(t, v, "get", "pods", "-A")
			mustContain(t, "kubectl "+v+" get deployments -A", kc(t, v, "get", "deployments", "-A"), "NAMESPACE", agNS, agSvc)
			agAPIResources(t, "kubectl "+v+" api-resources with the server gone", kcRun(v, "api-resources"),
				[]string{"pods", "deployments", "apiservices", "customresourcedefinitions"}, agGroup)
			mustContain(t, "kubectl "+v+" get --raw /apis", kc(t, v, "get", "--raw", "/apis"), `"name":"apps"`)
		}
		// Other groups are served as before.
		if code, body := agRaw(t, cs, "/apis/apps/v1"); code != 200 {
			t.Errorf("GET /apis/apps/v1 with the extension server gone: %d %s", code, body)
		}
	})

	t.Run("ServerBack_AvailableAgain", func(t *testing.T) {
		lcKubectl(t, c, "scale", "deployment", agSvc, "-n", agNS, "--replicas=1")
		agWaitEndpoints(t, c, 1, 2*time.Minute)
		lcWait(t, c, time.Minute, 500*time.Millisecond, "APIService Available=True again", func() (bool, string) {
			cond, status := apiService()
			return cond != nil && cond.Status == apiregistrationv1.ConditionTrue, status
		})
		mustContain(t, "kubectl get flunders", kc(t, "1.33", "get", "flunders", "-n", agNS), "flunder-a", "flunder-b")
	})
	step("outage and recovery")

	lcKubectl(t, c, "delete", "apiservice", agAPISvc, "--timeout=60s")
	lcWait(t, c, 30*time.Second, 500*time.Millisecond, "group gone from /apis", func() (bool, string) {
		out := lcKubectl(t, c, "get", "--raw", "/apis")
		return !strings.Contains(out, agGroup), out
	})
	lcKubectl(t, c, "delete", "namespace", agNS, "--timeout=90s")
	lcKubectl(t, c, "delete", "rolebinding", "-n", "kube-system", agSvc+"-auth-reader")
	lcKubectl(t, c, "delete", "clusterrole", "flunder-reader", "flunder-reader-carol")
	step("cleanup")
}

// agWaitEndpoints waits until the extension server's Service has n ready
// endpoints.
func agWaitEndpoints(t *testing.T, c *netCluster, n int, within time.Duration) {
	t.Helper()
	lcWait(t, c, within, time.Second, fmt.Sprintf("%d ready endpoints of %s/%s", n, agNS, agSvc), func() (bool, string) {
		out := lcKubectl(t, c, "get", "endpointslices", "-n", agNS, "-l", "kubernetes.io/service-name="+agSvc,
			"-o", `jsonpath={range .items[*].endpoints[*]}{.addresses[0]} ready={.conditions.ready}{"\n"}{end}`)
		return strings.Count(out, "ready=true") == n, "endpoints: " + out
	}, func() string { return c.kubectlNoFail("describe", "pods", "-n", agNS) })
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The metrics-server chart as a user installs it, default values: its
// APIService v1beta1.metrics.k8s.io is registered while its pods never
// run (the server has no node here, so nothing tries to pull an image);
// the APIService says why it is unavailable, the rest of discovery is
// unharmed, and uninstalling removes it.
func TestHelm_MetricsServerChart_InstallsWithAPIService(t *testing.T) {
	chart := metricsServerChart(t)
	c := startClusterWith(t, "--disable-agent")
	kubectls := kubectlVersions(t)
	cacheDir := t.TempDir()
	kcv := func(v string, args ...string) (string, string, error) {
		return c.run(t, kubectls[v], "", append([]string{"--cache-dir", filepath.Join(cacheDir, v)}, args...)...)
	}
	kc := func(args ...string) (string, string, error) { return kcv("1.33", args...) }
	const name = "v1beta1.metrics.k8s.io"
	helm(t, "install", "metrics-server", chart, "--kubeconfig="+c.kubeconfig, "--namespace", "kube-system")
	mustContain(t, "helm list", helm(t, "list", "--kubeconfig="+c.kubeconfig, "--namespace", "kube-system"),
		"metrics-server", "deployed", "metrics-server-"+msChartVersion)

	var cond *apiregistrationv1.APIServiceCondition
	agPoll(t, time.Minute, 500*time.Millisecond, "APIService "+name+" Available=False with a reason", func() (bool, string) {
		out, errOut, err := kc("get", "apiservice", name, "-o", "json")
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, errOut)
		}
		var status string
		cond, status = agCondition(t, out)
		// EndpointsNotFound is passing: the EndpointSlice controller
		// writes an empty slice a moment after the Service appears.
		return cond != nil && cond.Status == apiregistrationv1.ConditionFalse && cond.Reason != "EndpointsNotFound", status
	})
	t.Logf("%s: Available=False reason %s: %s", name, cond.Reason, cond.Message)
	if cond.Reason != "MissingEndpoints" || !strings.Contains(cond.Message, "metrics-server") {
		t.Errorf("%s: reason %q message %q, want MissingEndpoints naming service/metrics-server", name, cond.Reason, cond.Message)
	}
	out, _, err := kc("get", "apiservice", name)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "kubectl get apiservice", out, "kube-system/metrics-server", "False (MissingEndpoints)")

	cs, err := kubernetes.NewForConfig(c.clientGoConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	code, body := agRaw(t, cs, "/apis/metrics.k8s.io/v1beta1")
	agWantServiceUnavailable(t, "GET /apis/metrics.k8s.io/v1beta1", code, body)
	for _, v := range []string{"1.27", "1.33"} {
		agAPIResources(t, "kubectl "+v+" api-resources with metrics-server down", func() (string, string, error) { return kcv(v, "api-resources") },
			[]string{"pods", "deployments", "apiservices", "customresourcedefinitions"}, "metrics.k8s.io")
	}
	// The group stays listed, as upstream's /apis lists every APIService.
	if out, errOut, err := kc("get", "--raw", "/apis"); err != nil || !strings.Contains(out, `"name":"metrics.k8s.io"`) {
		t.Errorf("GET /apis with metrics-server down: %v %s, want it to list metrics.k8s.io: %s", err, errOut, out)
	}
	if out, errOut, err := kc("get", "pods", "-A"); err != nil {
		t.Fatalf("kubectl get pods -A: %v: %s", err, errOut)
	} else {
		mustContain(t, "kubectl get pods -A", out, "metrics-server")
	}
	if _, errOut, err := kc("top", "pods", "-n", "kube-system"); err == nil {
		t.Error("kubectl top pods succeeded without a metrics server")
	} else {
		t.Logf("kubectl top pods: %s", strings.TrimSpace(errOut))
	}

	helm(t, "uninstall", "metrics-server", "--kubeconfig="+c.kubeconfig, "--namespace", "kube-system", "--timeout", "2m")
	agPoll(t, 30*time.Second, 500*time.Millisecond, "APIService "+name+" removed", func() (bool, string) {
		out, errOut, err := kc("get", "apiservice", name)
		return err != nil && strings.Contains(errOut, "NotFound"), fmt.Sprintf("%v: %s%s", err, out, errOut)
	})
	// With the APIService gone nothing is left to fail discovery.
	agPoll(t, 30*time.Second, 500*time.Millisecond, "kubectl api-resources succeeds", func() (bool, string) {
		out, errOut, err := kc("api-resources")
		return err == nil && !strings.Contains(out, "metrics.k8s.io"), fmt.Sprintf("%v: %s", err, errOut)
	})
}
