package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"skiff/server/apiserver"
)

func TestDefaultTolerations_CreateAndUpdate_AddTheBoundedNodeTolerations(t *testing.T) {
	custom := corev1.Toleration{Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name     string
		attrs    func(*corev1.Pod) apiserver.AdmissionAttributes
		wantKeys []string
	}{
		{"create", func(p *corev1.Pod) apiserver.AdmissionAttributes {
			return apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: p}
		}, []string{"foo", corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable}},
		// An update that replaces the tolerations keeps the defaults, which
		// pod update validation would refuse to see removed.
		{"update replacing the tolerations", func(p *corev1.Pod) apiserver.AdmissionAttributes {
			return apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Object: p, Old: &corev1.Pod{}}
		}, []string{"foo", corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable}},
		{"status subresource left alone", func(p *corev1.Pod) apiserver.AdmissionAttributes {
			return apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Subresource: "status", Object: p, Old: &corev1.Pod{}}
		}, []string{"foo"}},
		{"delete left alone", func(p *corev1.Pod) apiserver.AdmissionAttributes {
			return apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Object: p}
		}, []string{"foo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{custom}}}
			if err := (DefaultTolerations{Seconds: 300}).Admit(context.Background(), tc.attrs(pod)); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, tol := range pod.Spec.Tolerations {
				keys = append(keys, tol.Key)
				if tol.Key != "foo" && (tol.TolerationSeconds == nil || *tol.TolerationSeconds != 300) {
					t.Errorf("%s: tolerationSeconds %v, want 300", tol.Key, tol.TolerationSeconds)
				}
			}
			if len(keys) != len(tc.wantKeys) {
				t.Fatalf("tolerations %v, want %v", keys, tc.wantKeys)
			}
			for i := range keys {
				if keys[i] != tc.wantKeys[i] {
					t.Fatalf("tolerations %v, want %v", keys, tc.wantKeys)
				}
			}
		})
	}
}
