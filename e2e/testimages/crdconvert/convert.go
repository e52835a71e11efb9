package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/e2e/testimages/reviewhttp"
)

// The sample CRD this webhook converts: widgets.stable.skiff.test, whose v1
// keeps the address as one string (spec.hostPort: "host:port") and whose v2
// splits it (spec.host, spec.port as an integer) — upstream's classic
// conversion example, moved under spec so that a structural schema fits it.
const (
	Group = "stable.skiff.test"
	V1    = Group + "/v1"
	V2    = Group + "/v2"
)

// errConvert marks a conversion the webhook refuses (bad value or version):
// it is answered as a Failure result, not as an HTTP error.
var errConvert = errors.New("cannot convert")

// convertObject returns obj converted to apiVersion to. The input is not
// changed; metadata is kept as is, as the API server requires.
func convertObject(obj map[string]any, to string) (map[string]any, error) {
	from, _ := obj["apiVersion"].(string)
	if from == to {
		// The API server never asks for this: a same-version request
		// means its conversion logic is wrong, which a test should see.
		return nil, fmt.Errorf("%w: conversion from a version to itself should not call the webhook: %s", errConvert, to)
	}
	out := runtime.DeepCopyJSON(obj)
	spec, _ := out["spec"].(map[string]any)
	switch {
	case from == V1 && to == V2:
		if err := splitHostPort(spec); err != nil {
			return nil, err
		}
	case from == V2 && to == V1:
		if err := joinHostPort(spec); err != nil {
			return nil, err
		}
	case from != V1 && from != V2:
		return nil, fmt.Errorf("%w: unexpected conversion version %q", errConvert, from)
	default:
		return nil, fmt.Errorf("%w: unexpected conversion version %q", errConvert, to)
	}
	out["apiVersion"] = to
	return out, nil
}

// splitHostPort turns v1's spec.hostPort into v2's spec.host and spec.port.
func splitHostPort(spec map[string]any) error {
	hp, ok := spec["hostPort"]
	if !ok {
		return nil
	}
	s, _ := hp.(string)
	host, port, found := strings.Cut(s, ":")
	if !found || strings.Contains(port, ":") {
		return fmt.Errorf("%w: invalid hostPort value %q: want host:port", errConvert, s)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return fmt.Errorf("%w: invalid port in hostPort %q: %v", errConvert, s, err)
	}
	delete(spec, "hostPort")
	spec["host"] = host
	spec["port"] = n
	return nil
}

// joinHostPort turns v2's spec.host and spec.port into v1's spec.hostPort.
func joinHostPort(spec map[string]any) error {
	host, hasHost := spec["host"]
	port, hasPort := spec["port"]
	if !hasHost && !hasPort {
		return nil
	}
	h, _ := host.(string)
	p := ""
	switch v := port.(type) {
	case nil:
	case json.Number:
		p = v.String()
	case int64:
		p = strconv.FormatInt(v, 10)
	case float64:
		p = strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		p = v
	default:
		return fmt.Errorf("%w: invalid port %v", errConvert, port)
	}
	delete(spec, "host")
	delete(spec, "port")
	spec["hostPort"] = h + ":" + p
	return nil
}

// review answers one ConversionRequest: every object converted, or a
// Failure result naming the first object that could not be.
func review(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, ConvertedObjects: []runtime.RawExtension{}}
	for i, raw := range req.Objects {
		obj, err := decodeObject(raw.Raw)
		if err == nil {
			obj, err = convertObject(obj, req.DesiredAPIVersion)
		}
		var b []byte
		if err == nil {
			b, err = json.Marshal(obj)
		}
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("objects[%d]: %v", i, err)}
			return resp
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// decodeObject keeps numbers as json.Number so that an int64 port or a
// resourceVersion survives the round trip exactly.
func decodeObject(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		return nil, fmt.Errorf("%w: decode object: %v", errConvert, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("%w: object is null", errConvert)
	}
	return obj, nil
}

// reviewKind is what /convert takes and gives.
var reviewKind = apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview")

// serveConvert is the /convert endpoint: a POSTed
// apiextensions.k8s.io/v1 ConversionReview in, the same kind out.
func serveConvert(w http.ResponseWriter, r *http.Request) {
	var in apiextensionsv1.ConversionReview
	if !reviewhttp.Read(w, r, reviewKind, &in) {
		return
	}
	reviewhttp.Write(w, apiextensionsv1.ConversionReview{TypeMeta: in.TypeMeta, Response: review(in.Request)})
}
