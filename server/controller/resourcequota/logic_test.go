package resourcequota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCountedResource_Name_GroupResource(t *testing.T) {
	for _, tc := range []struct {
		name corev1.ResourceName
		want schema.GroupResource
		ok   bool
	}{
		{"count/configmaps", schema.GroupResource{Resource: "configmaps"}, true},
		{"count/replicasets.apps", schema.GroupResource{Group: "apps", Resource: "replicasets"}, true},
		{"count/crontabs.stable.example.com", schema.GroupResource{Group: "stable.example.com", Resource: "crontabs"}, true},
		{"secrets", schema.GroupResource{Resource: "secrets"}, true},
		{"resourcequotas", quotasGR, true},
		{"count/", schema.GroupResource{}, false},
		{"requests.cpu", schema.GroupResource{}, false},
		{"pods", schema.GroupResource{}, false},
	} {
		gr, ok := countedResource(tc.name)
		if gr != tc.want || ok != tc.ok {
			t.Errorf("countedResource(%q) = %v, %v; want %v, %v", tc.name, gr, ok, tc.want, tc.ok)
		}
	}
}

func TestStatusStale_Status_Priority(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status corev1.ResourceQuotaStatus
		want   bool
	}{
		{"new quota", corev1.ResourceQuotaStatus{}, true},
		{"hard differs", corev1.ResourceQuotaStatus{Hard: list("cpu", "2"), Used: list("cpu", "0")}, true},
		{"same hard in another form", corev1.ResourceQuotaStatus{Hard: list("cpu", "1000m"), Used: list("cpu", "0")}, false},
		{"used missing a name", corev1.ResourceQuotaStatus{Hard: list("cpu", "1")}, true},
		{"up to date", corev1.ResourceQuotaStatus{Hard: list("cpu", "1"), Used: list("cpu", "5")}, false},
	} {
		q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: list("cpu", "1")}, Status: tc.status}
		if got := statusStale(q); got != tc.want {
			t.Errorf("%s: statusStale = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMonitoredResources_Quota_OnlyUntypedCounts(t *testing.T) {
	q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: list(
		"count/replicasets.apps", "1", "configmaps", "1", "count/pods", "1", "resourcequotas", "1",
		"services.nodeports", "1", "count/events", "1", "requests.cpu", "1")}}
	got := monitoredResources(q)
	want := map[schema.GroupResource]bool{{Group: "apps", Resource: "replicasets"}: true, {Resource: "configmaps"}: true}
	if len(got) != len(want) {
		t.Fatalf("monitoredResources = %v, want %v", got, want)
	}
	for gr := range want {
		if !got[gr] {
			t.Errorf("monitoredResources = %v, want %v", got, want)
		}
	}
}
