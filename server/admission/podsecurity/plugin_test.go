package podsecurity

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/registry"
)

type fakeNamespaces map[string]*corev1.Namespace

func (f fakeNamespaces) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	return f[name], nil
}

type fakePods struct {
	pods []*corev1.Pod
	err  error
}

func (f fakePods) ListPods(_ context.Context, namespace string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, p := range f.pods {
		if p.Namespace == namespace {
			out = append(out, p.DeepCopy())
		}
	}
	return out, f.err
}

// recorder collects the warnings of one request.
type recorder struct{ msgs []string }

func (r *recorder) AddWarning(m string) { r.msgs = append(r.msgs, m) }

type recorderKey struct{}

func warnerOf(ctx context.Context) Warner {
	if r, ok := ctx.Value(recorderKey{}).(*recorder); ok {
		return r
	}
	return nil
}

func ns(name string, kv ...string) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i < len(kv); i += 2 {
		n.Labels[labelPrefix+kv[i]] = kv[i+1]
	}
	return n
}

var resources = map[string]*registry.Resource{
	"pods":         {Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true},
	"namespaces":   {Version: "v1", Name: "namespaces", Kind: "Namespace"},
	"deployments":  {Group: "apps", Version: "v1", Name: "deployments", Kind: "Deployment", Namespaced: true},
	"replicasets":  {Group: "apps", Version: "v1", Name: "replicasets", Kind: "ReplicaSet", Namespaced: true},
	"statefulsets": {Group: "apps", Version: "v1", Name: "statefulsets", Kind: "StatefulSet", Namespaced: true},
	"daemonsets":   {Group: "apps", Version: "v1", Name: "daemonsets", Kind: "DaemonSet", Namespaced: true},
	"jobs":         {Group: "batch", Version: "v1", Name: "jobs", Kind: "Job", Namespaced: true},
	"cronjobs":     {Group: "batch", Version: "v1", Name: "cronjobs", Kind: "CronJob", Namespaced: true},
	"rcs":          {Version: "v1", Name: "replicationcontrollers", Kind: "ReplicationController", Namespaced: true},
	"podtemplates": {Version: "v1", Name: "podtemplates", Kind: "PodTemplate", Namespaced: true},
	"configmaps":   {Version: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
}

func newPlugin(t *testing.T, cfg Config, pods fakePods, namespaces ...*corev1.Namespace) *Plugin {
	t.Helper()
	nss := fakeNamespaces{}
	for _, n := range namespaces {
		nss[n.Name] = n
	}
	p, err := New(cfg, nss, pods, warnerOf)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// admit runs the plugin and returns its error and warnings.
func admit(p *Plugin, a apiserver.AdmissionAttributes) (error, []string) {
	r := &recorder{}
	err := p.Admit(context.WithValue(context.Background(), recorderKey{}, r), a)
	return err, r.msgs
}

func create(res string, obj runtime.Object) apiserver.AdmissionAttributes {
	return apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resources[res], Object: obj, User: &auth.User{Name: "alice"}}
}

func update(res, sub string, obj, old runtime.Object) apiserver.AdmissionAttributes {
	return apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: resources[res], Subresource: sub, Object: obj, Old: old, User: &auth.User{Name: "alice"}}
}

func privilegedPod() *corev1.Pod {
	p := barePod()
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	return p
}

func TestAdmit_Pods_EnforceRefusesAndWarnWarns(t *testing.T) {
	cfg := Config{Exemptions: Exemptions{Usernames: []string{"system:admin"}, Namespaces: []string{"free"}, RuntimeClasses: []string{"kata"}}}
	p := newPlugin(t, cfg, fakePods{},
		ns("ns", "enforce", "restricted"),
		ns("base", "enforce", "baseline", "warn", "restricted", "warn-version", "v1.22"),
		ns("old", "enforce", "restricted", "enforce-version", "v1.7"),
		ns("badlabel", "enforce", "strict"),
		ns("free", "enforce", "restricted"),
		ns("open"),
	)
	inNS := func(pod *corev1.Pod, n string) *corev1.Pod { pod.Namespace = n; return pod }
	withImage := func(pod *corev1.Pod, image string) *corev1.Pod { pod.Spec.Containers[0].Image = image; return pod }
	withLabel := func(pod *corev1.Pod) *corev1.Pod { pod.Labels = map[string]string{"x": "y"}; return pod }
	kata := barePod()
	kata.Spec.RuntimeClassName = ptr.To("kata")
	withEphemeral := restrictedPod()
	withEphemeral.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
	admin := create("pods", barePod())
	admin.User = &auth.User{Name: "system:admin"}
	deletePod := apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Resource: resources["pods"], Old: barePod()}

	cases := []struct {
		name     string
		a        apiserver.AdmissionAttributes
		code     int32
		msg      string
		warnings []string
	}{
		{name: "create breaking restricted is refused", a: create("pods", barePod()), code: http.StatusForbidden,
			msg: `pods "p" is forbidden: violates PodSecurity "restricted:latest": ` + bareLatest},
		{name: "create meeting restricted is admitted", a: create("pods", restrictedPod())},
		{name: "enforce at an old version", a: create("pods", inNS(barePod(), "old")), code: http.StatusForbidden,
			msg: `pods "p" is forbidden: violates PodSecurity "restricted:v1.7": ` + nonRootC},
		{name: "baseline enforce admits and restricted warn warns", a: create("pods", inNS(barePod(), "base")),
			warnings: []string{`would violate PodSecurity "restricted:v1.22": ` + bareLatest}},
		{name: "baseline enforce refuses privileged without warning", a: create("pods", inNS(privilegedPod(), "base")), code: http.StatusForbidden,
			msg: `pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`},
		{name: "bad enforce label enforces restricted", a: create("pods", inNS(barePod(), "badlabel")), code: http.StatusForbidden,
			msg: `pods "p" is forbidden: violates PodSecurity "restricted:latest": ` + bareLatest},
		{name: "unlabelled namespace with privileged defaults admits", a: create("pods", inNS(privilegedPod(), "open"))},
		{name: "exempt namespace", a: create("pods", inNS(privilegedPod(), "free"))},
		{name: "exempt user", a: admin},
		{name: "exempt runtime class", a: create("pods", kata)},
		{name: "status update is not checked", a: update("pods", "status", barePod(), barePod())},
		{name: "label update is not significant", a: update("pods", "", withLabel(barePod()), barePod())},
		{name: "image update is checked", a: update("pods", "", withImage(barePod(), "nginx"), barePod()), code: http.StatusForbidden,
			msg: `pods "p" is forbidden: violates PodSecurity "restricted:latest": ` + bareLatest},
		{name: "new ephemeral container is checked", a: update("pods", "ephemeralcontainers", withEphemeral, restrictedPod()), code: http.StatusForbidden,
			msg: `pods "p" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "dbg" must set securityContext.allowPrivilegeEscalation=false), ` +
				`unrestricted capabilities (container "dbg" must set securityContext.capabilities.drop=["ALL"])`},
		{name: "delete is not checked", a: deletePod},
		{name: "missing namespace is an internal error", a: create("pods", inNS(barePod(), "gone")), code: http.StatusInternalServerError,
			msg: `Internal error occurred: failed to lookup namespace "gone"`},
		{name: "other resources are not checked", a: create("configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err, warnings := admit(p, tc.a)
			checkStatus(t, err, tc.code, tc.msg)
			if !reflect.DeepEqual(warnings, tc.warnings) {
				t.Errorf("warnings = %q, want %q", warnings, tc.warnings)
			}
		})
	}
}

func checkStatus(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	if code == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a status error %d", err, code)
	}
	if se.ErrStatus.Code != code || se.ErrStatus.Message != msg {
		t.Errorf("got %d %q\nwant %d %q", se.ErrStatus.Code, se.ErrStatus.Message, code, msg)
	}
}

func TestAdmit_ConfigDefaults_ApplyToUnlabelledNamespaces(t *testing.T) {
	cfg := Config{Defaults: Defaults{Enforce: "baseline", Warn: "restricted", WarnVersion: "v1.30"}}
	p := newPlugin(t, cfg, fakePods{}, ns("ns"), ns("labelled", "enforce", "privileged", "warn", "privileged"))
	err, _ := admit(p, create("pods", privilegedPod()))
	checkStatus(t, err, http.StatusForbidden, `pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`)
	err, warnings := admit(p, create("pods", barePod()))
	checkStatus(t, err, 0, "")
	if want := []string{`would violate PodSecurity "restricted:v1.30": ` + bareLatest}; !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings = %q, want %q", warnings, want)
	}
	pod := privilegedPod()
	pod.Namespace = "labelled"
	if err, warnings := admit(p, create("pods", pod)); err != nil || len(warnings) > 0 {
		t.Errorf("labels did not override defaults: %v %q", err, warnings)
	}
}

func TestNew_InvalidConfig_Refused(t *testing.T) {
	if _, err := New(Config{Defaults: Defaults{Enforce: "strict"}}, fakeNamespaces{}, fakePods{}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("err = %v, want ErrConfig", err)
	}
	if _, err := New(Config{}, nil, fakePods{}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("no namespace getter: err = %v, want ErrConfig", err)
	}
}

func TestAdmit_NoWarner_WarningsDropped(t *testing.T) {
	p, err := New(Config{}, fakeNamespaces{"base": ns("base", "warn", "restricted")}, fakePods{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := barePod()
	pod.Namespace = "base"
	if err := p.Admit(context.Background(), create("pods", pod)); err != nil {
		t.Fatal(err)
	}
}

// TestAdmit_Workloads_TemplatesWarnNeverRefuse: pod templates get warn
// checks only; enforce is left to the pods they make.
func TestAdmit_Workloads_TemplatesWarnNeverRefuse(t *testing.T) {
	p := newPlugin(t, Config{Exemptions: Exemptions{Namespaces: []string{"free"}}}, fakePods{},
		ns("ns", "enforce", "restricted"), ns("quiet", "enforce", "restricted", "warn", "privileged"), ns("free", "enforce", "restricted"))
	om := metav1.ObjectMeta{Name: "w", Namespace: "ns"}
	tmpl := corev1.PodTemplateSpec{Spec: barePod().Spec}
	want := []string{`would violate PodSecurity "restricted:latest": ` + bareLatest}
	cases := []struct {
		res  string
		obj  runtime.Object
		sub  string
		want []string
	}{
		{res: "deployments", obj: &appsv1.Deployment{ObjectMeta: om, Spec: appsv1.DeploymentSpec{Template: tmpl}}, want: want},
		{res: "replicasets", obj: &appsv1.ReplicaSet{ObjectMeta: om, Spec: appsv1.ReplicaSetSpec{Template: tmpl}}, want: want},
		{res: "statefulsets", obj: &appsv1.StatefulSet{ObjectMeta: om, Spec: appsv1.StatefulSetSpec{Template: tmpl}}, want: want},
		{res: "daemonsets", obj: &appsv1.DaemonSet{ObjectMeta: om, Spec: appsv1.DaemonSetSpec{Template: tmpl}}, want: want},
		{res: "jobs", obj: &batchv1.Job{ObjectMeta: om, Spec: batchv1.JobSpec{Template: tmpl}}, want: want},
		{res: "cronjobs", obj: &batchv1.CronJob{ObjectMeta: om, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, want: want},
		{res: "rcs", obj: &corev1.ReplicationController{ObjectMeta: om, Spec: corev1.ReplicationControllerSpec{Template: &tmpl}}, want: want},
		{res: "podtemplates", obj: &corev1.PodTemplate{ObjectMeta: om, Template: tmpl}, want: want},
		{res: "rcs", obj: &corev1.ReplicationController{ObjectMeta: om}},
		{res: "deployments", obj: &appsv1.Deployment{ObjectMeta: om, Spec: appsv1.DeploymentSpec{Template: tmpl}}, sub: "scale"},
		{res: "deployments", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "quiet"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}},
		{res: "deployments", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "free"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}},
		{res: "deployments", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "gone"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}},
	}
	for _, tc := range cases {
		acc := tc.obj.(metav1.Object)
		t.Run(tc.res+"/"+tc.sub+"/"+acc.GetNamespace(), func(t *testing.T) {
			a := create(tc.res, tc.obj)
			if tc.sub != "" {
				a = update(tc.res, tc.sub, tc.obj, tc.obj)
			}
			err, warnings := admit(p, a)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !reflect.DeepEqual(warnings, tc.want) {
				t.Errorf("warnings = %q, want %q", warnings, tc.want)
			}
		})
	}
}
