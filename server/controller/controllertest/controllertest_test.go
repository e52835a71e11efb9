package controllertest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/controller/controllertest"
)

func TestRecorder(t *testing.T) {
	r := &controllertest.Recorder{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1"}}
	r.Eventf(pod, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", pod.Name)
	r.Event(pod, corev1.EventTypeWarning, "FailedCreate", "exceeded quota")
	if got := r.WithReason("FailedCreate"); len(got) != 1 || got[0] != (controllertest.Event{Object: "web-1", Type: "Warning", Reason: "FailedCreate", Message: "exceeded quota"}) {
		t.Errorf("WithReason = %+v", got)
	}
	if !r.Has("Normal SuccessfulCreate Created pod: web-") || r.Has("Normal FailedCreate") {
		t.Errorf("Has misreads %s", r)
	}
	if got, want := r.String(), "[Normal SuccessfulCreate Created pod: web-1 Warning FailedCreate exceeded quota]"; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
}

// TestStartAndRun checks that the namespaces are there and that the
// controller is stopped, and waited for, when its test ends.
func TestStartAndRun(t *testing.T) {
	var stopped atomic.Bool
	t.Run("controller", func(t *testing.T) {
		env := controllertest.Start(t, controllertest.Options{Namespaces: []string{"a", "b"}, Timeout: time.Minute})
		for _, ns := range []string{"a", "b"} {
			if _, err := env.Client.CoreV1().Namespaces().Get(env.Ctx, ns, metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		controllertest.Run(t, env.Ctx, func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(10 * time.Millisecond)
			stopped.Store(true)
			return nil
		})
		controllertest.Eventually(t, env.Ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
			_, err := env.Client.CoreV1().Namespaces().Get(ctx, "a", metav1.GetOptions{})
			return err == nil, err
		}, "namespace %s", "a")
	})
	if !stopped.Load() {
		t.Error("the controller outlived its test")
	}
}
