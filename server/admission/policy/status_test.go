package policy

import (
	"context"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRunStatus_NewGeneration_ObservedWithTypeChecking(t *testing.T) {
	pol := deploymentPolicy("p", nil)
	pol.Generation = 3
	pol.Status.Conditions = []metav1.Condition{{Type: "Kept", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	checked := deploymentPolicy("done", nil)
	checked.Generation, checked.Status.ObservedGeneration = 2, 2
	c := fake.NewClientset(pol, checked)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := RunStatus(ctx, StatusConfig{Client: c, Informers: informers.NewSharedInformerFactory(c, 0)}); err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	var got *admissionregistrationv1.ValidatingAdmissionPolicy
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "p", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == 3, err
	})
	if err != nil {
		t.Fatalf("status never observed generation 3: %v (%+v)", err, got.Status)
	}
	if got.Status.TypeChecking == nil || len(got.Status.TypeChecking.ExpressionWarnings) != 0 {
		t.Fatalf("typeChecking %+v, want present without warnings", got.Status.TypeChecking)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Kept" {
		t.Fatalf("conditions %+v, want the existing one kept", got.Status.Conditions)
	}
	done, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "done", metav1.GetOptions{})
	if err != nil || done.Status.TypeChecking != nil {
		t.Fatalf("an observed generation was rewritten: %+v, %v", done.Status, err)
	}
}
