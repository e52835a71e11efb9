package aggregator

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func TestCheck_ServiceAndEndpointStates_UpstreamReasons(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/wardle.example.com/v1alpha1" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"kind":"APIResourceList"}`))
	})
	forbidden := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })
	otherPort := sampleService()
	otherPort.Spec.Ports[0].Port = 8443
	named := sampleService()
	named.Spec.Ports[0].Name = "https"
	tests := []struct {
		name    string
		objs    []any
		handler http.Handler
		status  apiregistrationv1.ConditionStatus
		reason  string
		message string
	}{
		{"no service", nil, ok, apiregistrationv1.ConditionFalse, "ServiceNotFound", `service/sample-api in "wardle" is not present`},
		{"service without the port", []any{otherPort, sampleSlice(true)}, ok, apiregistrationv1.ConditionFalse, "ServicePortError", `service/sample-api in "wardle" is not listening on port 7443`},
		{"no endpointslices", []any{sampleService()}, ok, apiregistrationv1.ConditionFalse, "EndpointsNotFound", `cannot find endpointslices for service/sample-api in "wardle"`},
		{"no ready endpoint", []any{sampleService(), sampleSlice(false)}, ok, apiregistrationv1.ConditionFalse, "MissingEndpoints", `endpointslices for service/sample-api in "wardle" have no addresses with port name ""`},
		{"slice port of another name", []any{named, sampleSlice(true)}, ok, apiregistrationv1.ConditionFalse, "MissingEndpoints", `have no addresses with port name "https"`},
		{"discovery refused", []any{sampleService(), sampleSlice(true)}, forbidden, apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", "bad status from https://10.42.0.7:443/apis/wardle.example.com/v1alpha1: 403"},
		{"all good", []any{sampleService(), sampleSlice(true)}, ok, apiregistrationv1.ConditionTrue, "Passed", "all checks passed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, tt.handler)
			res := listers(t, tt.objs...)
			ck := &checker{services: listerReads{res}, slices: listerReads{res}, resolver: res, transports: b.transports()}
			got := ck.check(context.Background(), remoteAPIService(b.caBundle))
			if got.Type != apiregistrationv1.Available || got.Status != tt.status || got.Reason != tt.reason || !strings.Contains(got.Message, tt.message) {
				t.Errorf("condition = %s %s %q, want %s %s containing %q", got.Status, got.Reason, got.Message, tt.status, tt.reason, tt.message)
			}
		})
	}
}

func TestCheck_CABundleOfAnotherCA_FailsDiscovery(t *testing.T) {
	b := newBackend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	other := newBackend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	res := listers(t, sampleService(), sampleSlice(true))
	ck := &checker{services: listerReads{res}, slices: listerReads{res}, resolver: res, transports: b.transports()}
	got := ck.check(context.Background(), remoteAPIService(other.caBundle))
	if got.Status != apiregistrationv1.ConditionFalse || got.Reason != "FailedDiscoveryCheck" || !strings.Contains(got.Message, "certificate") {
		t.Errorf("condition = %s %s %q, want False FailedDiscoveryCheck about the certificate", got.Status, got.Reason, got.Message)
	}
}

func TestCheck_ExternalNameService_SkipsEndpointChecks(t *testing.T) {
	b := newBackend(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	svc := &corev1.Service{ObjectMeta: sampleService().ObjectMeta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "api.example.net"}}
	res := listers(t, svc)
	ck := &checker{services: listerReads{res}, slices: listerReads{res}, resolver: res, transports: b.transports()}
	got := ck.check(context.Background(), remoteAPIService(b.caBundle))
	if got.Status != apiregistrationv1.ConditionTrue {
		t.Fatalf("condition = %s %s %q, want True", got.Status, got.Reason, got.Message)
	}
	if addrs := b.addresses(); len(addrs) == 0 || addrs[0] != "api.example.net:7443" {
		t.Errorf("dialled %v, want api.example.net:7443", addrs)
	}
}

func TestSetCondition_SameStatus_KeepsTransitionTime(t *testing.T) {
	s := &apiregistrationv1.APIService{}
	first := newCondition(apiregistrationv1.ConditionFalse, "ServiceNotFound", "a")
	first.LastTransitionTime.Time = first.LastTransitionTime.Add(-3600e9)
	setCondition(s, first)
	setCondition(s, newCondition(apiregistrationv1.ConditionFalse, "MissingEndpoints", "b"))
	c := condition(s, apiregistrationv1.Available)
	if len(s.Status.Conditions) != 1 || c.Reason != "MissingEndpoints" || c.Message != "b" || !c.LastTransitionTime.Equal(&first.LastTransitionTime) {
		t.Errorf("after a same-status change: %+v", s.Status.Conditions)
	}
	setCondition(s, newCondition(apiregistrationv1.ConditionTrue, "Passed", "all checks passed"))
	if c := condition(s, apiregistrationv1.Available); c.LastTransitionTime.Equal(&first.LastTransitionTime) {
		t.Error("a status change kept the old transition time")
	}
}
