package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/e2e/testimages/tlsserve/tlsservetest"
)

func widget(apiVersion string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": apiVersion, "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default", "labels": map[string]any{"a": "b"}},
		"spec":     spec,
	}
}

func TestConvertObject_Versions(t *testing.T) {
	cases := []struct {
		name    string
		in      map[string]any
		to      string
		want    map[string]any
		wantErr string
	}{
		{"v1 to v2 splits hostPort", widget(V1, map[string]any{"hostPort": "db:5432", "other": "x"}), V2,
			widget(V2, map[string]any{"host": "db", "port": int64(5432), "other": "x"}), ""},
		{"v2 to v1 joins host and port", widget(V2, map[string]any{"host": "db", "port": json.Number("5432")}), V1,
			widget(V1, map[string]any{"hostPort": "db:5432"}), ""},
		{"v2 to v1 with only a host", widget(V2, map[string]any{"host": "db"}), V1,
			widget(V1, map[string]any{"hostPort": "db:"}), ""},
		{"v1 without hostPort keeps spec", widget(V1, map[string]any{"other": "x"}), V2,
			widget(V2, map[string]any{"other": "x"}), ""},
		{"v1 hostPort without colon fails", widget(V1, map[string]any{"hostPort": "db"}), V2, nil, `invalid hostPort value "db"`},
		{"v1 hostPort with bad port fails", widget(V1, map[string]any{"hostPort": "db:x"}), V2, nil, `invalid port in hostPort "db:x"`},
		{"same version fails", widget(V1, nil), V1, nil, "version to itself"},
		{"unknown target fails", widget(V1, nil), Group + "/v3", nil, `unexpected conversion version "stable.skiff.test/v3"`},
		{"unknown source fails", widget("other.test/v1", nil), V1, nil, `unexpected conversion version "other.test/v1"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.DeepCopyJSON(tc.in)
			got, err := convertObject(tc.in, tc.to)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, errConvert) {
					t.Fatalf("err = %v, want errConvert containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
			if !reflect.DeepEqual(tc.in, before) {
				t.Errorf("input changed: %#v", tc.in)
			}
		})
	}
}

func rawObjects(t *testing.T, objs ...map[string]any) []runtime.RawExtension {
	t.Helper()
	var out []runtime.RawExtension
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, runtime.RawExtension{Raw: b})
	}
	return out
}

func TestReview_AllObjects_ConvertedInOrderWithUID(t *testing.T) {
	a := widget(V1, map[string]any{"hostPort": "a:1"})
	b := widget(V1, map[string]any{"hostPort": "b:2"})
	b["metadata"].(map[string]any)["name"] = "w2"
	resp := review(&apiextensionsv1.ConversionRequest{UID: "u-1", DesiredAPIVersion: V2, Objects: rawObjects(t, a, b)})
	if resp.UID != "u-1" || resp.Result.Status != metav1.StatusSuccess {
		t.Fatalf("uid %q result %+v, want u-1 Success", resp.UID, resp.Result)
	}
	if len(resp.ConvertedObjects) != 2 {
		t.Fatalf("%d converted objects, want 2", len(resp.ConvertedObjects))
	}
	for i, want := range []string{`"host":"a","port":1`, `"host":"b","port":2`} {
		s := string(resp.ConvertedObjects[i].Raw)
		if !strings.Contains(s, want) || !strings.Contains(s, `"apiVersion":"stable.skiff.test/v2"`) {
			t.Errorf("object %d = %s, want v2 with %s", i, s, want)
		}
	}
	if !strings.Contains(string(resp.ConvertedObjects[1].Raw), `"name":"w2"`) {
		t.Errorf("object 1 lost its metadata: %s", resp.ConvertedObjects[1].Raw)
	}
}

func TestReview_OneBadObject_FailureNamesIt(t *testing.T) {
	resp := review(&apiextensionsv1.ConversionRequest{UID: "u-2", DesiredAPIVersion: V2,
		Objects: rawObjects(t, widget(V1, map[string]any{"hostPort": "a:1"}), widget(V1, map[string]any{"hostPort": "bad"}))})
	if resp.UID != "u-2" || resp.Result.Status != metav1.StatusFailure || !strings.HasPrefix(resp.Result.Message, "objects[1]: ") {
		t.Fatalf("got uid %q result %+v, want u-2 Failure about objects[1]", resp.UID, resp.Result)
	}
	if len(resp.ConvertedObjects) != 0 {
		t.Errorf("a failed review carries %d objects", len(resp.ConvertedObjects))
	}
}

func reviewBody(t *testing.T, req *apiextensionsv1.ConversionRequest) []byte {
	t.Helper()
	b, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRun_TLSFromFiles_ServesConvertUntilCancelled(t *testing.T) {
	srv := tlsservetest.New(t, "crdconvert")
	srv.Start(t, func(ctx context.Context) error { return Run(ctx, srv.Config) })
	body := reviewBody(t, &apiextensionsv1.ConversionRequest{UID: "u-tls", DesiredAPIVersion: V1,
		Objects: rawObjects(t, widget(V2, map[string]any{"host": "h", "port": 80}))})
	resp, err := srv.CA.Client().Post(srv.URL+"/convert", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiextensionsv1.ConversionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Kind != "ConversionReview" || out.APIVersion != "apiextensions.k8s.io/v1" || out.Response == nil || out.Response.UID != "u-tls" {
		t.Fatalf("response %+v, want a v1 ConversionReview for u-tls", out)
	}
	if got := string(out.Response.ConvertedObjects[0].Raw); !strings.Contains(got, `"hostPort":"h:80"`) {
		t.Errorf("converted %s, want hostPort h:80", got)
	}
}
