package openapi

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/yaml"
)

func TestTypeConverterConvertsARealDeployment(t *testing.T) {
	tc, err := buildDocs(t).TypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromString("25%"))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx",
					Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				}}},
			},
		},
	}
	tv, err := tc.ObjectToTyped(dep)
	if err != nil {
		t.Fatalf("ObjectToTyped: %v", err)
	}
	fields, err := tv.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	// The container is addressed by its key, which only a map-list schema yields.
	if want := `.spec.template.spec.containers[name="web"].image`; !strings.Contains(fields.String(), want) {
		t.Errorf("field set lacks %s:\n%s", want, fields)
	}
	back, err := tc.TypedToObject(tv)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.(*unstructured.Unstructured).GetName(); got != "web" {
		t.Errorf("round trip name = %q", got)
	}
}

func TestServerSideApplyMergesManagersByListKeys(t *testing.T) {
	fm := deploymentFieldManager(t)
	live := runtime.Object(&appsv1.Deployment{})
	steps := []struct {
		name, manager, manifest string
		force                   bool
		wantErr                 string
		wantContainers          []string
	}{
		{name: "first manager creates container a", manager: "alice", manifest: applied("a", "nginx", ""), wantContainers: []string{"a"}},
		{name: "second manager adds container b and both stay", manager: "bob", manifest: applied("b", "redis", ""), wantContainers: []string{"a", "b"}},
		{name: "a port without protocol is keyed by its TCP default", manager: "bob", manifest: applied("b", "redis", "        ports:\n        - containerPort: 6379\n"), wantContainers: []string{"a", "b"}},
		{name: "changing another manager's field conflicts", manager: "bob", manifest: applied("a", "httpd", ""), wantErr: "conflict"},
		{name: "forcing takes the field over", manager: "bob", manifest: applied("a", "httpd", ""), force: true, wantContainers: []string{"a"}},
	}
	for _, s := range steps {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(s.manifest), &obj); err != nil {
			t.Fatal(err)
		}
		out, err := fm.Apply(live, &unstructured.Unstructured{Object: obj}, s.manager, s.force)
		if s.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Fatalf("%s: error %v, want %q", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		live = out
		var got []string
		for _, c := range out.(*appsv1.Deployment).Spec.Template.Spec.Containers {
			got = append(got, c.Name)
		}
		if msg := eq(s.name, got, s.wantContainers); msg != "" {
			t.Fatal(msg)
		}
	}
}

func deploymentFieldManager(t *testing.T) *managedfields.FieldManager {
	t.Helper()
	tc, err := buildDocs(t).TypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	fm, err := managedfields.NewDefaultFieldManager(tc, scheme, scheme, scheme, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return fm
}

// applied is an apply configuration that owns one container of "web".
func applied(container, image, extra string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: ` + container + `
        image: ` + image + "\n" + extra
}

func ptr[T any](v T) *T { return &v }
