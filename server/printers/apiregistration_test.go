package printers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func TestAPIServicePrinter_States_UpstreamCells(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	withCond := func(svc *apiregistrationv1.ServiceReference, conds ...apiregistrationv1.APIServiceCondition) runtime.Object {
		return &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com", CreationTimestamp: created},
			Spec: apiregistrationv1.APIServiceSpec{Service: svc}, Status: apiregistrationv1.APIServiceStatus{Conditions: conds}}
	}
	ref := &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "sample-api"}
	p, ok := For(schema.GroupKind{Group: "apiregistration.k8s.io", Kind: "APIService"})
	if !ok {
		t.Fatal("no APIService printer")
	}
	tests := []struct {
		name           string
		obj            runtime.Object
		service, avail string
	}{
		{"local", withCond(nil, apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: "True", Reason: "Local"}), "Local", "True"},
		{"failing", withCond(ref, apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: "False", Reason: "MissingEndpoints"}), "ns/sample-api", "False (MissingEndpoints)"},
		{"not checked yet", withCond(ref), "ns/sample-api", "Unknown"},
	}
	for _, tt := range tests {
		rows, err := Rows(p, []runtime.Object{tt.obj}, now)
		if err != nil {
			t.Fatal(err)
		}
		c := rows[0].Cells
		if c[0] != "v1alpha1.wardle.example.com" || c[1] != tt.service || c[2] != tt.avail || c[3] != "120m" {
			t.Errorf("%s: cells = %v", tt.name, c)
		}
	}
}
