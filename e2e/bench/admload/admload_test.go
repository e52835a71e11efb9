package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"skiff/e2e/bench/loadkit"
)

func TestAnswer_WhenMutating_PatchAddsLabelWithOrWithoutLabels(t *testing.T) {
	for _, tc := range []struct {
		name, object string
		wantLabels   map[string]string
	}{
		{"no labels", `{"metadata":{"name":"a"}}`, map[string]string{mutatedLabel: mutatedValue}},
		{"empty labels", `{"metadata":{"name":"a","labels":{}}}`, map[string]string{mutatedLabel: mutatedValue}},
		{"other labels kept", `{"metadata":{"name":"a","labels":{"x":"y"}}}`, map[string]string{"x": "y", mutatedLabel: mutatedValue}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &admissionv1.AdmissionRequest{UID: types.UID("u1"), Object: runtime.RawExtension{Raw: []byte(tc.object)}}
			resp, err := answer(req, true)
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Allowed || resp.UID != "u1" || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("response %+v, want allowed with the request's UID and a JSONPatch", resp)
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Apply([]byte(tc.object))
			if err != nil {
				t.Fatalf("patch %s does not apply: %v", resp.Patch, err)
			}
			var got struct {
				Metadata struct{ Labels map[string]string } `json:"metadata"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Metadata.Labels) != len(tc.wantLabels) || got.Metadata.Labels[mutatedLabel] != mutatedValue {
				t.Fatalf("labels after the patch %v, want %v", got.Metadata.Labels, tc.wantLabels)
			}
			for k, v := range tc.wantLabels {
				if got.Metadata.Labels[k] != v {
					t.Fatalf("labels after the patch %v, want %v", got.Metadata.Labels, tc.wantLabels)
				}
			}
		})
	}
}

func TestAnswer_WhenValidating_AllowsWithoutPatch(t *testing.T) {
	resp, err := answer(&admissionv1.AdmissionRequest{UID: "u2"}, false)
	if err != nil || !resp.Allowed || resp.Patch != nil || resp.UID != "u2" {
		t.Fatalf("answer = %+v, %v; want allowed, no patch", resp, err)
	}
}

// TestHookServer_WhenCalledOverTLSWithItsCA_AnswersAndCountsByNamespace:
// a client trusting only the server's CA reaches it at its URL, as the
// API server does with the caBundle.
func TestHookServer_WhenCalledOverTLSWithItsCA_AnswersAndCountsByNamespace(t *testing.T) {
	h, err := startHookServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	if !strings.HasPrefix(h.URL, "https://127.0.0.1:") {
		t.Fatalf("URL %q, want https on 127.0.0.1", h.URL)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(h.CA) {
		t.Fatal("CA is not PEM")
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	post := func(path, ns string) admissionv1.AdmissionReview {
		rev := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u", Namespace: ns, Object: runtime.RawExtension{Raw: []byte(`{"metadata":{}}`)}}}
		rev.APIVersion, rev.Kind = "admission.k8s.io/v1", "AdmissionReview"
		b, _ := json.Marshal(rev)
		resp, err := hc.Post(h.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil || out.Response == nil {
			t.Fatalf("%s: status %d, review %+v", path, resp.StatusCode, out)
		}
		return out
	}
	if out := post(mutatePath, "a"); out.Response.Patch == nil || out.Kind != "AdmissionReview" || out.Request != nil {
		t.Fatalf("mutate answered %+v, want a review with a patch and no request", out)
	}
	post(validatePath, "a")
	post(validatePath, "a")
	post(validatePath, "b")
	for _, c := range []struct {
		path, ns string
		want     int64
	}{{mutatePath, "a", 1}, {validatePath, "a", 2}, {validatePath, "b", 1}, {mutatePath, "b", 0}} {
		if got := h.Calls(c.path, c.ns); got != c.want {
			t.Errorf("Calls(%s, %s) = %d, want %d", c.path, c.ns, got, c.want)
		}
	}
}

func TestExpected_EachSetup_WantsOnlyItsOwnEffects(t *testing.T) {
	want := map[string]observed{
		"none":       {},
		"validating": {ValCalled: true},
		"mut+val":    {Labeled: true, MutCalled: true, ValCalled: true},
		"vap":        {BigRefused: true},
		"quota":      {},
	}
	for _, s := range allSetups() {
		if got := expected(s); got != want[s.Key] {
			t.Errorf("expected(%s) = %+v, want %+v", s.Key, got, want[s.Key])
		}
	}
	if len(allSetups()) != len(want) {
		t.Fatalf("%d setups, want %d", len(allSetups()), len(want))
	}
}

func TestChooseSetups_WhenUnknown_Fails(t *testing.T) {
	if _, err := chooseSetups("none,bogus"); err == nil {
		t.Fatal("an unknown setup was accepted")
	}
	got, err := chooseSetups("quota,none")
	if err != nil || len(got) != 2 || got[0].Key != "quota" || got[1].Key != "none" {
		t.Fatalf("chooseSetups = %v, %v", got, err)
	}
}

func TestSummarize_WhenRoundsDrift_DifferencesArePairedByRound(t *testing.T) {
	m := func(round int, key string, rate, p50 float64) measurement {
		return measurement{Round: round, Setup: key, Create: loadkit.LatStats{Count: 100, PerSec: rate, P50ms: p50}}
	}
	rep := &report{Setups: []setup{{Key: "none"}, {Key: "quota", Quota: true}}, Measurements: []measurement{
		m(1, "none", 1000, 5), m(1, "quota", 500, 10),
		m(2, "none", 500, 10), m(2, "quota", 250, 20), // the machine got slower
		m(3, "none", 800, 6), m(3, "quota", 400, 12),
		{Round: 4, Setup: "quota", Skipped: "not in force"},
	}}
	rows := summarize(rep)
	q := rows[1]
	if q.timed != 3 || q.skipped != 1 {
		t.Fatalf("quota timed %d skipped %d, want 3 and 1", q.timed, q.skipped)
	}
	if r := medianF(q.rateRatio); r != 0.5 {
		t.Fatalf("median rate ratio %v, want 0.5 in every round", r)
	}
	if d := medianF(q.dP50); d != 6 {
		t.Fatalf("median p50 difference %v, want 6 (of 5, 10, 6)", d)
	}
	if d := medianF(q.dWallMs); d != 1.25 {
		t.Fatalf("median wall-time difference %v ms, want 1.25 (of 1, 2, 1.25)", d)
	}
}

func TestMedianF_WhenEven_AveragesMiddle(t *testing.T) {
	if got := medianF([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("medianF = %v, want 2.5", got)
	}
}
