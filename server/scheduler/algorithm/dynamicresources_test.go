package algorithm

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestSchedule_PodWithResourceClaims_StaysUnschedulableEverywhere(t *testing.T) {
	nodes := []*v1.Node{mkNode("a", "8", "8Gi"), mkNode("b", "8", "8Gi")}
	a := algorithmFor(t, DefaultProfile())
	st := NewSnapshot(nodes, nil)
	cases := []struct {
		name   string
		claims []v1.PodResourceClaim
		fits   bool
	}{
		{"no claims", nil, true},
		{"claim by name", []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu-claim")}}, false},
		{"claim from a template", []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := mkPod("p", req("1", ""))
			pod.Spec.ResourceClaims = tc.claims
			res, err := a.Schedule(pod, st)
			if tc.fits {
				if err != nil || res.Node == "" {
					t.Fatalf("Schedule = %v, %v; want a node", res, err)
				}
				return
			}
			var fe *FitError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a FitError", err)
			}
			if want := "0/2 nodes are available: " + ReasonNoDRA + "."; fe.Error() != want {
				t.Errorf("got  %q\nwant %q", fe.Error(), want)
			}
			if !fe.Diagnosis.UnschedulablePlugins.Has(DynamicResources) {
				t.Errorf("unschedulable plugins = %v, want %s", fe.Diagnosis.UnschedulablePlugins, DynamicResources)
			}
			if p := a.Preempt(pod, st, &fe.Diagnosis, nil); p.Node != "" {
				t.Errorf("preemption nominated %s; evicting pods cannot allocate a claim", p.Node)
			}
		})
	}
}
