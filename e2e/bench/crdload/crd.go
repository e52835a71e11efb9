package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"skiff/e2e/bench/loadkit"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const (
	crdKind   = "Widget"
	crdPlural = "widgets"
	// maxPayload bounds spec.k1 and spec.k2; with maxLength the CEL rule's
	// estimated cost is bounded, as upstream requires.
	maxPayload = 256
	// ruleText is the one x-kubernetes-validations rule; badObject breaks it.
	ruleText = "self.k1.size() + self.k2.size() <= 400"
)

// benchCRD is a namespaced CRD with a small structural schema: a defaulted
// field (spec.mode), one CEL rule on spec and a status subresource.
func benchCRD(group string) *apiextensionsv1.CustomResourceDefinition {
	str := func(maxLen int64) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To(maxLen)}
	}
	spec := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"k1":       str(maxPayload),
			"k2":       str(maxPayload),
			"replicas": {Type: "integer", Minimum: ptr.To(0.0), Maximum: ptr.To(100.0)},
			"mode":     {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"fast"`)}, {Raw: []byte(`"slow"`)}}, Default: &apiextensionsv1.JSON{Raw: []byte(`"fast"`)}},
		},
		Required:     []string{"k1", "k2"},
		XValidations: apiextensionsv1.ValidationRules{{Rule: ruleText, Message: "k1 and k2 together exceed 400 characters"}},
	}
	status := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"observedReplicas": {Type: "integer"},
	}}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: crdPlural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: crdPlural, Singular: "widget", Kind: crdKind, ListKind: crdKind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec, "status": status},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// crdTiming is how long after the start of the CRD's Create call its
// resource answered a LIST, showed in discovery, and the CRD said
// Established=True.
type crdTiming struct {
	CRD           string  `json:"crd"`
	CreateMs      float64 `json:"create_call_ms"`
	ListMs        float64 `json:"to_list_ok_ms"`
	DiscoveryMs   float64 `json:"to_discovery_ms"`
	EstablishedMs float64 `json:"to_established_ms"`
	ListPolls     int     `json:"list_polls"`
	FirstListCode int     `json:"first_list_code"`
	// NotServedAfterEstablished counts LIST polls sent after the CRD was
	// seen Established=True that still failed: the window in which a
	// client that waits for Established (as the e2e tests do) gets a 404.
	// Upstream serves from NamesAccepted on, before Established.
	NotServedAfterEstablished int `json:"list_failures_after_established"`
}

// poller calls probe every interval from start until it says done or ctx
// ends, and records when it first said done.
type poller struct {
	name  string
	probe func(ctx context.Context) (bool, error)
	took  time.Duration
	polls int
	err   error
}

func (p *poller) run(ctx context.Context, start time.Time, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		p.polls++
		done, err := p.probe(ctx)
		if done {
			p.took = time.Since(start)
			return
		}
		if err != nil {
			p.err = err
		}
		select {
		case <-ctx.Done():
			p.err = fmt.Errorf("%s: not within the bound (last error: %v): %w", p.name, p.err, ctx.Err())
			return
		case <-tick.C:
		}
	}
}

// getStatus GETs path and gives its status code and body.
func getStatus(ctx context.Context, hc *http.Client, host, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// timeCRD creates the CRD for group and polls, every interval and all at
// once, a LIST of its resource, its group-version's discovery document and
// the CRD's Established condition.
func timeCRD(ctx context.Context, dyn dynamic.Interface, hc *http.Client, host, group string, every, bound time.Duration) (crdTiming, error) {
	crd := benchCRD(group)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return crdTiming{}, err
	}
	t := crdTiming{CRD: crd.Name}
	firstCode, lateFailures := 0, 0
	var start time.Time
	var establishedAt atomic.Int64 // since start; 0 until seen
	list := &poller{name: "list", probe: func(ctx context.Context) (bool, error) {
		sent := time.Since(start)
		code, b, err := getStatus(ctx, hc, host, fmt.Sprintf("/apis/%s/v1/%s?limit=1", group, crdPlural))
		if firstCode == 0 {
			firstCode = code
		}
		if code != http.StatusOK {
			if at := establishedAt.Load(); at != 0 && sent > time.Duration(at) {
				lateFailures++
			}
		}
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("list: %d %s", code, truncate(b, 200))
		}
		return true, nil
	}}
	disco := &poller{name: "discovery", probe: func(ctx context.Context) (bool, error) {
		code, b, err := getStatus(ctx, hc, host, fmt.Sprintf("/apis/%s/v1", group))
		if err != nil || code != http.StatusOK {
			return false, err
		}
		var rl metav1.APIResourceList
		if err := json.Unmarshal(b, &rl); err != nil {
			return false, fmt.Errorf("discovery: %w", err)
		}
		for _, r := range rl.APIResources {
			if r.Name == crdPlural {
				return true, nil
			}
		}
		return false, nil
	}}
	established := &poller{name: "established", probe: func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(crdGVR).Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !conditionTrue(obj, string(apiextensionsv1.Established)) {
			return false, nil
		}
		establishedAt.Store(int64(max(time.Since(start), 1)))
		return true, nil
	}}

	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start = time.Now()
	if _, err := dyn.Resource(crdGVR).Create(pctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		return t, fmt.Errorf("create CRD %s: %s", crd.Name, loadkit.Describe(err))
	}
	t.CreateMs = loadkit.Ms(time.Since(start))
	var wg sync.WaitGroup
	for _, p := range []*poller{list, disco, established} {
		wg.Go(func() { p.run(pctx, start, every) })
	}
	wg.Wait()
	t.ListMs, t.DiscoveryMs, t.EstablishedMs = loadkit.Ms(list.took), loadkit.Ms(disco.took), loadkit.Ms(established.took)
	t.ListPolls, t.FirstListCode, t.NotServedAfterEstablished = list.polls, firstCode, lateFailures
	for _, p := range []*poller{list, disco, established} {
		if p.took == 0 {
			return t, p.err
		}
	}
	return t, nil
}

func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

func truncate(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// deleteCRD deletes the CRD and waits, at most bound, until it is gone:
// the server must first delete every custom object of it.
func deleteCRD(ctx context.Context, dyn dynamic.Interface, name string, bound time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := time.Now()
	if err := dyn.Resource(crdGVR).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return 0, fmt.Errorf("delete CRD %s: %s", name, loadkit.Describe(err))
	}
	for {
		_, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("CRD %s still there after %s (last error: %v)", name, bound, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
