package podsecurity

import (
	"errors"
	"net/http"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func named(pod *corev1.Pod, name string) *corev1.Pod {
	pod.Name = name
	return pod
}

func ownedBy(pod *corev1.Pod, uid types.UID) *corev1.Pod {
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: uid, Controller: ptr.To(true)}}
	return pod
}

const (
	bareReasons = "allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
)

func TestAdmit_NamespaceLabels_InvalidRefusedWith422(t *testing.T) {
	p := newPlugin(t, Config{}, fakePods{})
	bad := ns("x", "enforce", "strict", "warn-version", "1.2")
	err, _ := admit(p, create("namespaces", bad))
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusUnprocessableEntity {
		t.Fatalf("create with bad labels: %v", err)
	}
	wantMsg := `Namespace "x" is invalid: [metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted, ` +
		`metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.2": must be "latest" or "v1.x"]`
	if se.ErrStatus.Message != wantMsg {
		t.Errorf("message = %q\nwant      %q", se.ErrStatus.Message, wantMsg)
	}
	if c := se.ErrStatus.Details.Causes; len(c) != 2 || c[0].Field != "metadata.labels[pod-security.kubernetes.io/enforce]" || c[0].Type != metav1.CauseTypeFieldValueInvalid {
		t.Errorf("causes = %+v", c)
	}

	// An update that keeps the same bad labels is allowed (the namespace
	// stays editable); one that changes them to other bad values is not.
	relabelled := bad.DeepCopy()
	relabelled.Annotations = map[string]string{"a": "b"}
	if err, _ := admit(p, update("namespaces", "", relabelled, bad)); err != nil {
		t.Errorf("update keeping bad labels: %v", err)
	}
	worse := bad.DeepCopy()
	worse.Labels[EnforceLevelLabel] = "stricter"
	if err, _ := admit(p, update("namespaces", "", worse, bad)); !apierrors.IsInvalid(err) {
		t.Errorf("update changing bad labels: %v", err)
	}
	fixed := ns("x", "enforce", "baseline")
	if err, _ := admit(p, update("namespaces", "", fixed, bad)); err != nil {
		t.Errorf("update fixing labels: %v", err)
	}
	if err, _ := admit(p, update("namespaces", "status", worse, bad)); err != nil {
		t.Errorf("status update: %v", err)
	}
}

// TestAdmit_NamespaceEnforceTightened_WarnsAboutExistingPods: the warnings
// upstream gives, grouped by violation, first pod name and count.
func TestAdmit_NamespaceEnforceTightened_WarnsAboutExistingPods(t *testing.T) {
	pods := fakePods{pods: []*corev1.Pod{
		named(barePod(), "b"), named(barePod(), "a"), named(barePod(), "c"),
		named(privilegedPod(), "z"), named(restrictedPod(), "ok"),
		func() *corev1.Pod {
			p := named(privilegedPod(), "kata")
			p.Spec.RuntimeClassName = ptr.To("kata")
			return p
		}(),
	}}
	p := newPlugin(t, Config{Exemptions: Exemptions{RuntimeClasses: []string{"kata"}}}, pods)
	old := ns("ns", "enforce", "baseline")
	cases := []struct {
		name     string
		labels   []string
		old      *corev1.Namespace
		warnings []string
	}{
		{name: "baseline to restricted", labels: []string{"enforce", "restricted"}, old: old, warnings: []string{
			`existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest"`,
			`a (and 2 other pods): ` + bareReasons,
			`z: privileged, ` + bareReasons,
		}},
		{name: "privileged to baseline", labels: []string{"enforce", "baseline"}, old: ns("ns"), warnings: []string{
			`existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:latest"`,
			`z: privileged`,
		}},
		{name: "version change is checked", labels: []string{"enforce", "baseline", "enforce-version", "v1.20"}, old: old, warnings: []string{
			`existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:v1.20"`,
			`z: privileged`,
		}},
		{name: "unchanged enforce", labels: []string{"enforce", "baseline", "warn", "restricted"}, old: old},
		{name: "relaxed to privileged", labels: []string{"enforce", "privileged"}, old: old},
		{name: "relaxed at same version", labels: []string{"enforce", "baseline"}, old: ns("ns", "enforce", "restricted")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err, warnings := admit(p, update("namespaces", "", ns("ns", tc.labels...), tc.old))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(warnings, tc.warnings) {
				t.Errorf("warnings:\n%q\nwant\n%q", warnings, tc.warnings)
			}
		})
	}
}

func TestAdmit_NamespacePodLimit_OnePodPerControllerFirst(t *testing.T) {
	pods := fakePods{pods: []*corev1.Pod{
		ownedBy(named(barePod(), "rs-1"), "u1"), ownedBy(named(barePod(), "rs-2"), "u1"), named(privilegedPod(), "solo"),
	}}
	p := newPlugin(t, Config{}, pods)
	p.maxPods = 2
	err, warnings := admit(p, update("namespaces", "", ns("ns", "enforce", "restricted"), ns("ns")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`new PodSecurity enforce level only checked against the first 2 of 3 existing pods`,
		`existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest"`,
		`rs-1: ` + bareReasons,
		`solo: privileged, ` + bareReasons,
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings:\n%q\nwant\n%q", warnings, want)
	}
}

func TestAdmit_NamespacePodListFails_Warns(t *testing.T) {
	p := newPlugin(t, Config{}, fakePods{err: errors.New("boom")})
	err, warnings := admit(p, update("namespaces", "", ns("ns", "enforce", "restricted"), ns("ns")))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"failed to list pods while checking new PodSecurity enforce level"}; !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings = %q", warnings)
	}
}

func TestAdmit_ExemptNamespaceLabelled_WarnsLabelsIgnored(t *testing.T) {
	p := newPlugin(t, Config{Exemptions: Exemptions{Namespaces: []string{"kube-system"}}}, fakePods{pods: []*corev1.Pod{named(privilegedPod(), "z")}})
	cases := []struct {
		name     string
		a        func() (error, []string)
		warnings []string
	}{
		{name: "create with enforce", a: func() (error, []string) {
			return admit(p, create("namespaces", ns("kube-system", "enforce", "restricted")))
		}, warnings: []string{`namespace "kube-system" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored`}},
		{name: "create with all modes", a: func() (error, []string) {
			return admit(p, create("namespaces", ns("kube-system", "enforce", "baseline", "audit-version", "v1.30", "warn", "restricted")))
		}, warnings: []string{`namespace "kube-system" is exempt from Pod Security, and the policy (enforce=baseline:latest, warn=restricted:latest) will be ignored`}},
		{name: "update tightening enforce", a: func() (error, []string) {
			return admit(p, update("namespaces", "", ns("kube-system", "enforce", "restricted", "audit", "baseline"), ns("kube-system")))
		}, warnings: []string{`namespace "kube-system" is exempt from Pod Security, and the policy (enforce=restricted:latest, audit=baseline:latest) will be ignored`}},
		{name: "create privileged", a: func() (error, []string) {
			return admit(p, create("namespaces", ns("kube-system", "enforce", "privileged")))
		}},
		{name: "other namespace create", a: func() (error, []string) {
			return admit(p, create("namespaces", ns("other", "enforce", "restricted")))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err, warnings := tc.a()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(warnings, tc.warnings) {
				t.Errorf("warnings = %q, want %q", warnings, tc.warnings)
			}
		})
	}
}
