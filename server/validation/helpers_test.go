package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/defaults"
)

// errCase is one invalid variant of a valid object: mutate breaks it, and
// validation must report an error of type at path whose detail contains
// detail (when set).
type errCase[T runtime.Object] struct {
	name   string
	mutate func(T)
	typ    field.ErrorType
	path   string
	detail string
}

// runCreateCases checks that valid() passes and that every case fails with
// the expected error.
func runCreateCases[T runtime.Object](t *testing.T, valid func() T, cases []errCase[T]) {
	t.Helper()
	t.Run("valid object passes", func(t *testing.T) {
		expectNoErrors(t, Validate(valid()))
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := valid()
			c.mutate(obj)
			expectError(t, Validate(obj), c.typ, c.path, c.detail)
		})
	}
}

// updateCase changes a copy of a valid stored object; wantPath empty means
// the update must be accepted.
type updateCase[T runtime.Object] struct {
	name     string
	mutate   func(T)
	typ      field.ErrorType
	wantPath string
	detail   string
}

func runUpdateCases[T runtime.Object](t *testing.T, stored func() T, cases []updateCase[T]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := stored()
			obj := old.DeepCopyObject().(T)
			c.mutate(obj)
			errs := ValidateUpdate(obj, old)
			if c.wantPath == "" {
				expectNoErrors(t, errs)
				return
			}
			expectError(t, errs, c.typ, c.wantPath, c.detail)
		})
	}
}

func expectNoErrors(t *testing.T, errs field.ErrorList) {
	t.Helper()
	if len(errs) != 0 {
		t.Fatalf("expected no errors, got %d:\n%s", len(errs), dump(errs))
	}
}

func expectError(t *testing.T, errs field.ErrorList, typ field.ErrorType, path, detail string) {
	t.Helper()
	for _, e := range errs {
		if e.Type == typ && e.Field == path && strings.Contains(e.Detail, detail) {
			return
		}
	}
	t.Fatalf("expected %s error at %q (detail containing %q), got:\n%s", typ, path, detail, dump(errs))
}

func dump(errs field.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  " + e.Error() + "\n")
	}
	return b.String()
}

func objMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default"}
}

// stored marks an object as read back from storage, which updates require.
func stored[T runtime.Object](obj T) T {
	objectMeta(obj).ResourceVersion = "7"
	return obj
}

func defaulted[T runtime.Object](obj T) T {
	defaults.Apply(obj)
	return obj
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:         "app",
			Image:        "nginx:1.25",
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			Env:          []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
		}},
		Volumes: []corev1.Volume{{Name: "data"}},
	}
}

func validPod() *corev1.Pod {
	return defaulted(&corev1.Pod{ObjectMeta: objMeta("web"), Spec: podSpec()})
}

func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()}
}
