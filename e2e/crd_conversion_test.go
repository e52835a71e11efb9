package e2e

// A CRD with two served versions and Webhook conversion, converted by
// skiff's own conversion webhook (e2e/testimages/crdconvert) running as a
// pod behind a Service, as upstream's [sig-api-machinery]
// CustomResourceConversionWebhook tests deploy theirs: objects written in
// either version read back in the other, lists convert, the real kubectl
// reads the non-storage version, and a webhook that refuses or is gone
// gives the caller a clear Status at once while the storage version still
// reads and writes; once the webhook is back, the converted version shows
// exactly what storage holds.

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"skiff/e2e/testimages"
	"skiff/e2e/testimages/testpki"
)

const (
	ccNS      = "crdconv"
	ccSvc     = "crdconvert"
	ccCRDName = "widgets.stable.skiff.test"
	ccGroup   = "stable.skiff.test"
	// ccSvcPort is the Service port the CRD names; ccPodPort the
	// webhook's own.
	ccSvcPort = 443
	ccPodPort = 9443
)

var (
	ccV1 = schema.GroupVersionResource{Group: ccGroup, Version: "v1", Resource: "widgets"}
	ccV2 = schema.GroupVersionResource{Group: ccGroup, Version: "v2", Resource: "widgets"}
)

func TestCRDConversion_TwoVersionsWebhook_ServesBothConverted(t *testing.T) {
	begin := time.Now()
	step := func(what string) {
		t.Logf("%s: done at %v", what, time.Since(begin).Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, err := testimages.Build(ctx, e2eCache(t), testimages.CRDConvert)
	if err != nil {
		t.Fatal(err)
	}
	kubectls := kubectlVersions(t)
	step("image built")

	// One node: the server with its own agent. The webhook pod is bound
	// to it (nodeName) so that the API server dials a pod address on its
	// own bridge: no cross-node pod route is involved in what this test
	// is about, and the server never depends on reaching another node's
	// pod CIDR.
	c := newNetCluster(t, netClusterSpec{})
	c.waitNodesReady(1, 2*time.Minute)
	ccImport(t, c, img)
	step("cluster up, image imported")

	ca := testpki.NewCA(t, "crdconvert-ca")
	certPEM, keyPEM := ccServingPair(t, ca, ccSvc+"."+ccNS+".svc")
	manifests := ccWebhookManifests(img.Ref, c.server.Name, certPEM, keyPEM)
	// The namespace's default ServiceAccount, which pod admission wants,
	// comes from a controller a moment after the namespace.
	lcWait(t, c, time.Minute, time.Second, "webhook objects applied", func() (bool, string) {
		out, errOut, err := c.kubectlIn(manifests, "apply", "-f", "-")
		return err == nil, fmt.Sprintf("%v: %s%s", err, out, errOut)
	})
	lcWait(t, c, 2*time.Minute, time.Second, "webhook pod Ready with a ready endpoint", func() (bool, string) {
		pods := lcPods(t, c, "-n", ccNS)
		if len(pods) != 1 || podCondition(&pods[0], "Ready") != "True" {
			return false, lcJSON(pods)
		}
		n, eps := ccReadyEndpoints(t, c)
		return n == 1, "endpoints: " + eps
	}, func() string { return c.kubectlNoFail("describe", "pods", "-n", ccNS) })
	step("webhook pod ready")

	lcApply(t, c, ccCRD(ca.PEM))
	lcKubectl(t, c, "wait", "--for", "condition=established", "--timeout=60s", "crd/"+ccCRDName)
	dyn, err := dynamic.NewForConfig(c.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := dyn.Resource(ccV1).Namespace(ccNS), dyn.Resource(ccV2).Namespace(ccNS)
	// Established is set before the rows of both versions are served.
	lcWait(t, c, 30*time.Second, 200*time.Millisecond, "both versions served", func() (bool, string) {
		for _, r := range []dynamic.ResourceInterface{v1, v2} {
			if _, err := ccCall(t, "list", func(ctx context.Context) error { _, err := r.List(ctx, metav1.ListOptions{}); return err }); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	step("CRD established and served")

	t.Run("V1Object_ReadAsV2_HostAndPortSplit", func(t *testing.T) {
		ccMust(t, "create v1", func(ctx context.Context) error {
			_, err := v1.Create(ctx, ccWidget("v1", "from-v1", map[string]any{"hostPort": "db:5432"}), metav1.CreateOptions{})
			return err
		})
		got := ccGet(t, v2, "from-v1")
		ccWantSpec(t, got, "v2", map[string]any{"host": "db", "port": int64(5432)})
	})
	t.Run("V2Object_StoredAndReadAsV1_HostPortJoined", func(t *testing.T) {
		var created *unstructured.Unstructured
		ccMust(t, "create v2", func(ctx context.Context) error {
			var err error
			created, err = v2.Create(ctx, ccWidget("v2", "from-v2", map[string]any{"host": "cache", "port": int64(6379)}), metav1.CreateOptions{})
			return err
		})
		// The answer is the object as stored (v1), converted back.
		ccWantSpec(t, created, "v2", map[string]any{"host": "cache", "port": int64(6379)})
		ccWantSpec(t, ccGet(t, v1, "from-v2"), "v1", map[string]any{"hostPort": "cache:6379"})
	})
	t.Run("ListAsV2_BothConverted", func(t *testing.T) {
		var list *unstructured.UnstructuredList
		ccMust(t, "list v2", func(ctx context.Context) error {
			var err error
			list, err = v2.List(ctx, metav1.ListOptions{})
			return err
		})
		want := map[string]map[string]any{
			"from-v1": {"host": "db", "port": int64(5432)},
			"from-v2": {"host": "cache", "port": int64(6379)},
		}
		if len(list.Items) != len(want) {
			t.Fatalf("list v2: %d items, want %d: %v", len(list.Items), len(want), list.Items)
		}
		if list.GetAPIVersion() != ccGroup+"/v2" {
			t.Errorf("list v2: apiVersion %q", list.GetAPIVersion())
		}
		for i := range list.Items {
			it := &list.Items[i]
			spec, ok := want[it.GetName()]
			if !ok {
				t.Fatalf("list v2: unexpected item %s", it.GetName())
			}
			ccWantSpec(t, it, "v2", spec)
		}
	})
	t.Run("Kubectl_GetWidgetsV2", func(t *testing.T) {
		for _, v := range []string{"1.27", "1.33"} {
			out := svcKubectl(t, c, kubectls[v], "get", "widgets.v2."+ccGroup, "-n", ccNS,
				"-o", `jsonpath={range .items[*]}{.apiVersion} {.metadata.name} {.spec.host}:{.spec.port}{"\n"}{end}`)
			mustContain(t, "kubectl "+v+" get -o jsonpath", out, ccGroup+"/v2 from-v1 db:5432", ccGroup+"/v2 from-v2 cache:6379")
			// The server's Table, with v2's printer columns.
			out = svcKubectl(t, c, kubectls[v], "get", "widgets.v2."+ccGroup, "-n", ccNS)
			mustContain(t, "kubectl "+v+" get (table)", out, "HOST", "PORT", "from-v1", "db", "5432", "from-v2", "cache", "6379")
		}
	})
	step("conversions")

	t.Run("WebhookRefusesObject_ReadAsV2_Status500NamingTheWebhook", func(t *testing.T) {
		ccMust(t, "create v1 bad", func(ctx context.Context) error {
			_, err := v1.Create(ctx, ccWidget("v1", "bad", map[string]any{"hostPort": "bad"}), metav1.CreateOptions{})
			return err
		})
		took, err := ccCall(t, "get bad as v2", func(ctx context.Context) error { _, err := v2.Get(ctx, "bad", metav1.GetOptions{}); return err })
		ccWantConversionError(t, "get bad as v2", err, `invalid hostPort value "bad"`)
		t.Logf("get bad as v2: failed after %v: %v", took.Round(time.Millisecond), err)
		// The storage version reads it as written.
		ccWantSpec(t, ccGet(t, v1, "bad"), "v1", map[string]any{"hostPort": "bad"})
		ccMust(t, "delete bad", func(ctx context.Context) error { return v1.Delete(ctx, "bad", metav1.DeleteOptions{}) })
	})

	t.Run("WebhookGone_V2ReadFailsAtOnce_V1StillReads", func(t *testing.T) {
		lcKubectl(t, c, "delete", "pod", "-n", ccNS, ccSvc, "--timeout=60s")
		lcWait(t, c, time.Minute, 500*time.Millisecond, "no ready endpoint left", func() (bool, string) {
			n, eps := ccReadyEndpoints(t, c)
			return n == 0, "endpoints: " + eps
		})
		// The API server's watch cache follows the EndpointSlice a moment
		// after kubectl sees it.
		const want = `no endpoints available for service "` + ccSvc + `"`
		var err error
		var took time.Duration
		lcWait(t, c, 15*time.Second, 200*time.Millisecond, "v2 read fails for want of endpoints", func() (bool, string) {
			took, err = ccCall(t, "get from-v1 as v2", func(ctx context.Context) error { _, err := v2.Get(ctx, "from-v1", metav1.GetOptions{}); return err })
			return err != nil && strings.Contains(err.Error(), want), fmt.Sprint(err)
		})
		ccWantConversionError(t, "get from-v1 as v2", err, want)
		t.Logf("get from-v1 as v2 without the webhook: failed after %v: %v", took.Round(time.Millisecond), err)
		// No LIST as v2 here: as upstream's cacher, the API server serves
		// lists from its watch cache, which holds objects converted when
		// they were written; a GET without resourceVersion reads storage.

		ccWantSpec(t, ccGet(t, v1, "from-v1"), "v1", map[string]any{"hostPort": "db:5432"})
		ccWantSpec(t, ccGet(t, v1, "from-v2"), "v1", map[string]any{"hostPort": "cache:6379"})
		if names := ccNames(t, v1); names != "from-v1,from-v2" {
			t.Fatalf("list v1 without the webhook: %s, want from-v1,from-v2", names)
		}
		// Writes through the storage version need no conversion either.
		ccMust(t, "delete from-v2 as v1", func(ctx context.Context) error { return v1.Delete(ctx, "from-v2", metav1.DeleteOptions{}) })
		ccMust(t, "create while-down as v1", func(ctx context.Context) error {
			_, err := v1.Create(ctx, ccWidget("v1", "while-down", map[string]any{"hostPort": "queue:5672"}), metav1.CreateOptions{})
			return err
		})
		if names := ccNames(t, v1); names != "from-v1,while-down" {
			t.Fatalf("list v1 after writes without the webhook: %s, want from-v1,while-down", names)
		}
	})

	t.Run("WebhookBack_V2ListMatchesStorage", func(t *testing.T) {
		// The writes made while the webhook was gone could not be
		// converted when they happened; once it is back, v2 must show
		// what storage holds: no deleted object, no missing one (upstream's
		// cacher relists after a decode error and recovers).
		lcApply(t, c, manifests)
		lcWait(t, c, 2*time.Minute, time.Second, "webhook back with a ready endpoint", func() (bool, string) {
			n, eps := ccReadyEndpoints(t, c)
			return n == 1, "endpoints: " + eps
		}, func() string { return c.kubectlNoFail("describe", "pods", "-n", ccNS) })
		lcWait(t, c, 15*time.Second, 200*time.Millisecond, "v2 read converts again", func() (bool, string) {
			_, err := ccCall(t, "get from-v1 as v2", func(ctx context.Context) error { _, err := v2.Get(ctx, "from-v1", metav1.GetOptions{}); return err })
			return err == nil, fmt.Sprint(err)
		})
		ccWantSpec(t, ccGet(t, v2, "while-down"), "v2", map[string]any{"host": "queue", "port": int64(5672)})
		var names string
		lcWait(t, c, 15*time.Second, 500*time.Millisecond, "list as v2 matches storage", func() (bool, string) {
			names = ccNames(t, v2)
			return names == "from-v1,while-down", "list v2: " + names + ", want from-v1,while-down (as list v1: " + ccNames(t, v1) + ")"
		})
	})
	step("failures")

	lcKubectl(t, c, "delete", "crd", ccCRDName, "--timeout=60s")
	lcKubectl(t, c, "delete", "namespace", ccNS, "--timeout=90s")
	step("cleanup")
}

// ccWidget is a Widget at version with spec.
func ccWidget(version, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ccGroup + "/" + version,
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": ccNS},
		"spec":       spec,
	}}
}

// ccNames lists r and returns the names of its items, sorted, joined by
// commas.
func ccNames(t *testing.T, r dynamic.ResourceInterface) string {
	t.Helper()
	var list *unstructured.UnstructuredList
	ccMust(t, "list", func(ctx context.Context) error {
		var err error
		list, err = r.List(ctx, metav1.ListOptions{})
		return err
	})
	names := make([]string, 0, len(list.Items))
	for i := range list.Items {
		names = append(names, list.Items[i].GetName())
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// ccMust runs a bounded call that must succeed.
func ccMust(t *testing.T, what string, call func(ctx context.Context) error) {
	t.Helper()
	if _, err := ccCall(t, what, call); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ccGet(t *testing.T, r dynamic.ResourceInterface, name string) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	ccMust(t, "get "+name, func(ctx context.Context) error {
		var err error
		got, err = r.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	return got
}

// ccWantSpec checks the object is at version with exactly spec.
func ccWantSpec(t *testing.T, obj *unstructured.Unstructured, version string, spec map[string]any) {
	t.Helper()
	if got := obj.GetAPIVersion(); got != ccGroup+"/"+version {
		t.Errorf("%s: apiVersion %q, want %s/%s", obj.GetName(), got, ccGroup, version)
	}
	got, _, _ := unstructured.NestedMap(obj.Object, "spec")
	// DeepEqual, not printed forms: a port of "5432" (a string) is wrong.
	if !reflect.DeepEqual(got, spec) {
		t.Errorf("%s at %s: spec %#v, want %#v", obj.GetName(), version, got, spec)
	}
}

// ccWantConversionError checks err is the API server's 500 Status for a
// failed conversion: upstream's "conversion webhook for <gvk> failed: …",
// with the cause in the message.
func ccWantConversionError(t *testing.T, what string, err error, cause string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want a conversion failure", what)
	}
	se, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("%s: %T %v, want an API Status", what, err, err)
	}
	st := se.Status()
	if st.Code != http.StatusInternalServerError || st.Reason != metav1.StatusReasonInternalError || st.Status != metav1.StatusFailure {
		t.Errorf("%s: Status code %d reason %q status %q, want 500 InternalError Failure", what, st.Code, st.Reason, st.Status)
	}
	if !strings.Contains(st.Message, "conversion webhook for "+ccGroup+"/v1, Kind=Widget failed") {
		t.Errorf("%s: message %q does not name the conversion webhook", what, st.Message)
	}
	if !strings.Contains(st.Message, cause) {
		t.Errorf("%s: message %q, want the cause %q", what, st.Message, cause)
	}
}
