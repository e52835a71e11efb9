package bootstrap_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/defaults"
	"skiff/server/flowcontrol/bootstrap"
	"skiff/server/validation"
)

// The ensurer compares stored objects with these specs as they are, so
// the server's defaulting must leave them unchanged, and they must pass
// the server's validation or the server could not create them.
func TestBootstrapObjects_DefaultedAndValid(t *testing.T) {
	var objs []runtime.Object
	for _, o := range append(bootstrap.MandatoryFlowSchemas(), bootstrap.SuggestedFlowSchemas()...) {
		objs = append(objs, o)
	}
	for _, o := range append(bootstrap.MandatoryPriorityLevelConfigurations(), bootstrap.SuggestedPriorityLevelConfigurations()...) {
		objs = append(objs, o)
	}
	if len(objs) != 2+9+2+6 {
		t.Fatalf("%d bootstrap objects, want upstream's 19", len(objs))
	}
	for _, o := range objs {
		defaulted := o.DeepCopyObject()
		defaults.Apply(defaulted)
		if !equality.Semantic.DeepEqual(defaulted, o) {
			t.Errorf("%T %v: defaulting changes it", o, o)
		}
		if errs := validation.Validate(o); len(errs) > 0 {
			t.Errorf("%T: %v", o, errs)
		}
	}
}

func TestBootstrapObjects_FreshEachCall(t *testing.T) {
	a := bootstrap.MandatoryFlowSchemaCatchAll()
	a.Spec.MatchingPrecedence = 5
	if b := bootstrap.MandatoryFlowSchemaCatchAll(); b.Spec.MatchingPrecedence != 10000 {
		t.Errorf("a caller's change leaked into the next call: precedence %d", b.Spec.MatchingPrecedence)
	}
}
