package podsecurity

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/audit"
	"skiff/server/auth"
)

func TestAdmit_AuditAnnotations_AsUpstream(t *testing.T) {
	cfg := Config{Exemptions: Exemptions{Usernames: []string{"system:admin"}, Namespaces: []string{"free"}, RuntimeClasses: []string{"kata"}}}
	p := newPlugin(t, cfg, fakePods{},
		ns("audited", "audit", "restricted"),
		ns("both", "enforce", "baseline", "audit", "baseline"),
		ns("open"),
		ns("free", "enforce", "restricted"),
	)
	inNS := func(pod *corev1.Pod, n string) *corev1.Pod { pod.Namespace = n; return pod }
	kata := inNS(barePod(), "audited")
	kata.Spec.RuntimeClassName = ptr.To("kata")
	admin := create("pods", inNS(barePod(), "audited"))
	admin.User = &auth.User{Name: "system:admin"}
	cases := []struct {
		name string
		a    apiserver.AdmissionAttributes
		want map[string]string
	}{
		{name: "audit level broken: admitted and annotated", a: create("pods", inNS(barePod(), "audited")), want: map[string]string{
			"pod-security.kubernetes.io/enforce-policy":   "privileged:latest",
			"pod-security.kubernetes.io/audit-violations": `would violate PodSecurity "restricted:latest": ` + bareLatest}},
		{name: "audit level met", a: create("pods", inNS(restrictedPod(), "audited")), want: map[string]string{
			"pod-security.kubernetes.io/enforce-policy": "privileged:latest"}},
		{name: "refused by enforce, audit annotated too", a: create("pods", inNS(privilegedPod(), "both")), want: map[string]string{
			"pod-security.kubernetes.io/enforce-policy":   "baseline:latest",
			"pod-security.kubernetes.io/audit-violations": `would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`}},
		{name: "fully privileged namespace", a: create("pods", inNS(privilegedPod(), "open")), want: map[string]string{
			"pod-security.kubernetes.io/enforce-policy": "privileged:latest"}},
		{name: "exempt namespace", a: create("pods", inNS(barePod(), "free")), want: map[string]string{"pod-security.kubernetes.io/exempt": "namespace"}},
		{name: "exempt user", a: admin, want: map[string]string{"pod-security.kubernetes.io/exempt": "user"}},
		{name: "exempt runtime class", a: create("pods", kata), want: map[string]string{"pod-security.kubernetes.io/exempt": "runtimeClass"}},
		{name: "workload template audited", a: create("deployments", deploymentOf(inNS(barePod(), "audited"))), want: map[string]string{
			"pod-security.kubernetes.io/audit-violations": `would violate PodSecurity "restricted:latest": ` + bareLatest}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := audit.NewRecorder(audit.RequestConfig{Level: audit.LevelMetadata}, nil, audit.Event{})
			_ = p.Admit(audit.WithRecorder(context.Background(), rec), tc.a)
			if got := rec.Event().Annotations; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("annotations\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func deploymentOf(pod *corev1.Pod) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: pod.Namespace},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}}
}
