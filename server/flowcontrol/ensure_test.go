package flowcontrol

import (
	"context"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"skiff/server/flowcontrol/bootstrap"
)

func TestEnsure_EmptyCluster_CreatesEveryBootstrapObject(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	if err := Ensure(ctx, cs.FlowcontrolV1()); err != nil {
		t.Fatal(err)
	}
	fss, _ := cs.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{})
	pls, _ := cs.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{})
	wantFS := len(bootstrap.MandatoryFlowSchemas()) + len(bootstrap.SuggestedFlowSchemas())
	wantPL := len(bootstrap.MandatoryPriorityLevelConfigurations()) + len(bootstrap.SuggestedPriorityLevelConfigurations())
	if len(fss.Items) != wantFS || len(pls.Items) != wantPL {
		t.Fatalf("got %d FlowSchemas and %d levels, want %d and %d", len(fss.Items), len(pls.Items), wantFS, wantPL)
	}
	for _, fs := range fss.Items {
		if fs.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" {
			t.Errorf("%s: autoupdate annotation %q, want true", fs.Name, fs.Annotations[flowcontrolv1.AutoUpdateAnnotationKey])
		}
	}
	// A second pass has nothing to do.
	cs.ClearActions()
	if err := Ensure(ctx, cs.FlowcontrolV1()); err != nil {
		t.Fatal(err)
	}
	for _, a := range cs.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("second pass wrote: %s %s", v, a.GetResource().Resource)
		}
	}
}

// changedLevel is a suggested level as an administrator edited it.
func changedLevel(name, annotation string, generation int64) *flowcontrolv1.PriorityLevelConfiguration {
	var pl *flowcontrolv1.PriorityLevelConfiguration
	for _, p := range append(bootstrap.SuggestedPriorityLevelConfigurations(), bootstrap.MandatoryPriorityLevelConfigurations()...) {
		if p.Name == name {
			pl = p
		}
	}
	pl.Generation = generation
	pl.Annotations = map[string]string{}
	if annotation != "" {
		pl.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = annotation
	}
	pl.Spec.Limited.NominalConcurrencyShares = ptr.To(int32(777))
	return pl
}

func TestEnsure_ChangedObjects_AutoupdateAnnotationDecides(t *testing.T) {
	tests := []struct {
		name           string
		existing       *flowcontrolv1.PriorityLevelConfiguration
		wantShares     int32
		wantAnnotation string
	}{
		{"suggested, autoupdate true: reset", changedLevel("workload-low", "true", 2), 100, "true"},
		{"suggested, autoupdate false: left alone", changedLevel("workload-low", "false", 2), 777, "false"},
		{"suggested, no annotation, never changed: reset", changedLevel("global-default", "", 1), 20, "true"},
		{"suggested, no annotation, changed: kept and marked", changedLevel("global-default", "", 2), 777, "false"},
		{"suggested, unparsable annotation, changed: kept and marked", changedLevel("system", "maybe", 3), 777, "false"},
		{"mandatory, autoupdate false: reset anyway", changedLevel("catch-all", "false", 2), 5, "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cs := fake.NewClientset([]runtime.Object{tt.existing}...)
			if err := Ensure(ctx, cs.FlowcontrolV1()); err != nil {
				t.Fatal(err)
			}
			got, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, tt.existing.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s := *got.Spec.Limited.NominalConcurrencyShares; s != tt.wantShares {
				t.Errorf("shares = %d, want %d", s, tt.wantShares)
			}
			if a := got.Annotations[flowcontrolv1.AutoUpdateAnnotationKey]; a != tt.wantAnnotation {
				t.Errorf("annotation = %q, want %q", a, tt.wantAnnotation)
			}
		})
	}
}

func TestEnsure_ExemptLevel_KeepsAdministratorsExemptSettings(t *testing.T) {
	ctx := context.Background()
	exempt := bootstrap.MandatoryPriorityLevelExempt()
	exempt.Spec.Exempt.NominalConcurrencyShares = ptr.To(int32(40))
	cs := fake.NewClientset(exempt)
	if err := Ensure(ctx, cs.FlowcontrolV1()); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, "exempt", metav1.GetOptions{})
	if s := *got.Spec.Exempt.NominalConcurrencyShares; s != 40 {
		t.Errorf("exempt shares = %d, want the administrator's 40", s)
	}
}

func TestEnsure_OldBootstrapObjects_RemovedOnlyWhenAutoupdated(t *testing.T) {
	ctx := context.Background()
	fs := func(name string, annotations map[string]string) *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	}
	cs := fake.NewClientset(
		fs("from-an-old-release", map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}),
		fs("users-own", nil),
		fs("users-pinned", map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "false"}),
	)
	if err := Ensure(ctx, cs.FlowcontrolV1()); err != nil {
		t.Fatal(err)
	}
	for name, wantKept := range map[string]bool{"from-an-old-release": false, "users-own": true, "users-pinned": true, "global-default": true} {
		_, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if kept := err == nil; kept != wantKept {
			t.Errorf("%s kept = %v, want %v (err %v)", name, kept, wantKept, err)
		}
	}
}
