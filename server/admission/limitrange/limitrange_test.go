package limitrange

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/apiserver"
	"skiff/server/registry"
)

var (
	podsRes   = &registry.Resource{Version: "v1", Name: "pods", Kind: "Pod", Namespaced: true}
	claimsRes = &registry.Resource{Version: "v1", Name: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", Namespaced: true}
)

// fakeLister serves LimitRanges by namespace, or fails with err.
type fakeLister struct {
	byNS map[string][]*corev1.LimitRange
	err  error
}

func (f fakeLister) ListLimitRanges(_ context.Context, ns string) ([]*corev1.LimitRange, error) {
	return f.byNS[ns], f.err
}

// rl builds a resource list from name/quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func limitRange(name string, items ...corev1.LimitRangeItem) *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: items}}
}

// conformanceRange is the LimitRange of the conformance test "should create
// a LimitRange with defaults and ensure pod has those defaults applied".
func conformanceRange(min corev1.ResourceList) *corev1.LimitRange {
	return limitRange("limit-range", corev1.LimitRangeItem{
		Type:           corev1.LimitTypeContainer,
		Min:            min,
		Max:            rl("cpu", "500m", "memory", "500Mi", "ephemeral-storage", "500Gi"),
		Default:        rl("cpu", "500m", "memory", "500Mi", "ephemeral-storage", "500Gi"),
		DefaultRequest: rl("cpu", "100m", "memory", "200Mi", "ephemeral-storage", "200Gi"),
	})
}

// pod has one container "c" with the given requests and limits. As the
// API server does before admission, a limit without a request also
// becomes the request (pod defaulting).
func pod(name string, requests, limits corev1.ResourceList) *corev1.Pod {
	res := corev1.ResourceRequirements{Requests: requests, Limits: limits}
	for n, q := range limits {
		if _, ok := res.Requests[n]; !ok {
			if res.Requests == nil {
				res.Requests = corev1.ResourceList{}
			}
			res.Requests[n] = q
		}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: res}}}}
}

func admitPod(t *testing.T, p *corev1.Pod, lrs ...*corev1.LimitRange) error {
	t.Helper()
	plugin := Plugin{LimitRanges: fakeLister{byNS: map[string][]*corev1.LimitRange{"ns": lrs}}}
	return plugin.Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: podsRes, Object: p})
}

func equalList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if o, ok := b[n]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func TestAdmit_PodWithoutResources_GetsDefaultsAndAnnotation(t *testing.T) {
	cases := []struct {
		name                   string
		pod                    *corev1.Pod
		lrs                    []*corev1.LimitRange
		wantRequests, wantLims corev1.ResourceList
		wantAnnotation         string
	}{
		{
			name:           "conformance: no resources get default and defaultRequest",
			pod:            pod("pod-no-resources", nil, nil),
			lrs:            []*corev1.LimitRange{conformanceRange(rl("cpu", "50m", "memory", "100Mi", "ephemeral-storage", "100Gi"))},
			wantRequests:   rl("cpu", "100m", "memory", "200Mi", "ephemeral-storage", "200Gi"),
			wantLims:       rl("cpu", "500m", "memory", "500Mi", "ephemeral-storage", "500Gi"),
			wantAnnotation: "LimitRanger plugin set: cpu, ephemeral-storage, memory request for container c; cpu, ephemeral-storage, memory limit for container c",
		},
		{
			// A limit alone already became the request, so defaultRequest
			// only applies where no limit was given.
			name:           "conformance: partial resources are merged",
			pod:            pod("pod-partial-resources", rl("memory", "150Mi", "ephemeral-storage", "150Gi"), rl("cpu", "300m")),
			lrs:            []*corev1.LimitRange{conformanceRange(rl("cpu", "50m", "memory", "100Mi", "ephemeral-storage", "100Gi"))},
			wantRequests:   rl("cpu", "300m", "memory", "150Mi", "ephemeral-storage", "150Gi"),
			wantLims:       rl("cpu", "300m", "memory", "500Mi", "ephemeral-storage", "500Gi"),
			wantAnnotation: "LimitRanger plugin set: ephemeral-storage, memory limit for container c",
		},
		{
			name:         "fully specified pod is left alone",
			pod:          pod("full", rl("cpu", "200m", "memory", "300Mi", "ephemeral-storage", "300Gi"), rl("cpu", "400m", "memory", "400Mi", "ephemeral-storage", "400Gi")),
			lrs:          []*corev1.LimitRange{conformanceRange(nil)},
			wantRequests: rl("cpu", "200m", "memory", "300Mi", "ephemeral-storage", "300Gi"),
			wantLims:     rl("cpu", "400m", "memory", "400Mi", "ephemeral-storage", "400Gi"),
		},
		{
			name: "pod-type items give no defaults",
			pod:  pod("podtype", nil, rl("cpu", "1")),
			lrs: []*corev1.LimitRange{limitRange("pods", corev1.LimitRangeItem{Type: corev1.LimitTypePod,
				Max: rl("cpu", "2")})},
			wantRequests: rl("cpu", "1"),
			wantLims:     rl("cpu", "1"),
		},
		{
			name:         "no LimitRange leaves the pod alone",
			pod:          pod("none", nil, nil),
			wantRequests: nil,
			wantLims:     nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := admitPod(t, tc.pod, tc.lrs...); err != nil {
				t.Fatalf("Admit: %v", err)
			}
			got := tc.pod.Spec.Containers[0].Resources
			if !equalList(got.Requests, tc.wantRequests) {
				t.Errorf("requests = %v, want %v", got.Requests, tc.wantRequests)
			}
			if !equalList(got.Limits, tc.wantLims) {
				t.Errorf("limits = %v, want %v", got.Limits, tc.wantLims)
			}
			if a := tc.pod.Annotations[Annotation]; a != tc.wantAnnotation {
				t.Errorf("annotation = %q, want %q", a, tc.wantAnnotation)
			}
		})
	}
}

func TestAdmit_InitContainers_DefaultedAndNamedInAnnotation(t *testing.T) {
	p := pod("init", rl("cpu", "100m"), rl("cpu", "100m"))
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "pause"}}
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	lr := limitRange("lr", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Default: rl("cpu", "200m", "memory", "64Mi"), DefaultRequest: rl("cpu", "100m", "memory", "32Mi")})
	if err := admitPod(t, p, lr); err != nil {
		t.Fatal(err)
	}
	want := "LimitRanger plugin set: memory request for container c; memory limit for container c; " +
		"cpu, memory request for init container setup; cpu, memory limit for init container setup"
	if got := p.Annotations[Annotation]; got != want {
		t.Errorf("annotation = %q, want %q", got, want)
	}
	if got := p.Spec.InitContainers[0].Resources.Limits; !equalList(got, rl("cpu", "200m", "memory", "64Mi")) {
		t.Errorf("init container limits = %v", got)
	}
	if r := p.Spec.EphemeralContainers[0].Resources; r.Limits != nil || r.Requests != nil {
		t.Errorf("ephemeral container got resources %v", r)
	}
}

func TestAdmit_PodViolations_ForbiddenWithUpstreamMessage(t *testing.T) {
	container := func(min, max, ratio corev1.ResourceList) *corev1.LimitRange {
		return limitRange("lr", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: min, Max: max, MaxLimitRequestRatio: ratio})
	}
	podItem := func(min, max, ratio corev1.ResourceList) *corev1.LimitRange {
		return limitRange("lr", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Min: min, Max: max, MaxLimitRequestRatio: ratio})
	}
	conformance := conformanceRange(rl("cpu", "50m", "memory", "100Mi", "ephemeral-storage", "100Gi"))
	withInit := func(p *corev1.Pod, c corev1.Container) *corev1.Pod {
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		return p
	}
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name string
		pod  *corev1.Pod
		lr   *corev1.LimitRange
		want string // "" admits
	}{
		{"conformance: less than min", pod("pfpod", rl("cpu", "10m", "memory", "50Mi", "ephemeral-storage", "50Gi"), nil), conformance,
			`pods "pfpod" is forbidden: [minimum cpu usage per Container is 50m, but request is 10m, ` +
				`minimum ephemeral-storage usage per Container is 100Gi, but request is 50Gi, ` +
				`minimum memory usage per Container is 100Mi, but request is 50Mi]`},
		{"conformance: more than max", pod("pfpod", rl("cpu", "600m", "memory", "600Mi", "ephemeral-storage", "600Gi"), nil), conformance,
			`pods "pfpod" is forbidden: [maximum cpu usage per Container is 500m, but request is 600m, ` +
				`maximum ephemeral-storage usage per Container is 500Gi, but request is 600Gi, ` +
				`maximum memory usage per Container is 500Mi, but request is 600Mi]`},
		{"conformance: lowered min admits", pod("pfpod", rl("cpu", "10m", "memory", "50Mi", "ephemeral-storage", "50Gi"), nil),
			conformanceRange(rl("cpu", "9m", "memory", "49Mi", "ephemeral-storage", "49Gi")), ""},
		{"limit above max", pod("x", nil, rl("cpu", "1")), container(nil, rl("cpu", "500m"), nil),
			`pods "x" is forbidden: maximum cpu usage per Container is 500m, but limit is 1`},
		{"no limit under a max", pod("x", rl("cpu", "100m"), nil), container(nil, rl("cpu", "500m"), nil),
			`pods "x" is forbidden: maximum cpu usage per Container is 500m.  No limit is specified`},
		{"no request under a min", pod("x", nil, nil), container(rl("memory", "10Mi"), nil, nil),
			`pods "x" is forbidden: minimum memory usage per Container is 10Mi.  No request is specified`},
		{"limit below min", pod("x", rl("memory", "20Mi"), rl("memory", "5Mi")), container(rl("memory", "10Mi"), nil, nil),
			`pods "x" is forbidden: minimum memory usage per Container is 10Mi, but limit is 5Mi`},
		{"ratio above max", pod("x", rl("cpu", "250m"), rl("cpu", "1")), container(nil, nil, rl("cpu", "2")),
			`pods "x" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000`},
		{"ratio at max admits", pod("x", rl("cpu", "500m"), rl("cpu", "1")), container(nil, nil, rl("cpu", "2")), ""},
		{"ratio without limit", pod("x", rl("cpu", "500m"), nil), container(nil, nil, rl("cpu", "2")),
			`pods "x" is forbidden: cpu max limit to request ratio per Container is 2, but no limit is specified or limit is 0`},
		{"ratio without request", pod("x", nil, nil), container(nil, nil, rl("cpu", "2")),
			`pods "x" is forbidden: cpu max limit to request ratio per Container is 2, but no request is specified or request is 0`},
		{"init container above max", withInit(pod("x", nil, rl("cpu", "100m")), corev1.Container{Name: "i",
			Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2"), Limits: rl("cpu", "2")}}), container(nil, rl("cpu", "1"), nil),
			`pods "x" is forbidden: maximum cpu usage per Container is 1, but limit is 2`},
		{"pod sum of containers above max", func() *corev1.Pod {
			p := pod("x", nil, rl("memory", "300Mi"))
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d",
				Resources: corev1.ResourceRequirements{Requests: rl("memory", "300Mi"), Limits: rl("memory", "300Mi")}})
			return p
		}(), podItem(nil, rl("memory", "500Mi"), nil),
			`pods "x" is forbidden: maximum memory usage per Pod is 500Mi, but limit is 600Mi`},
		{"pod's largest init container counts when above the sum", withInit(pod("x", nil, rl("cpu", "100m")), corev1.Container{Name: "i",
			Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2"), Limits: rl("cpu", "2")}}), podItem(nil, rl("cpu", "1"), nil),
			`pods "x" is forbidden: maximum cpu usage per Pod is 1, but limit is 2`},
		{"pod sidecars add to the containers", withInit(pod("x", nil, rl("cpu", "600m")), corev1.Container{Name: "side", RestartPolicy: &always,
			Resources: corev1.ResourceRequirements{Requests: rl("cpu", "600m"), Limits: rl("cpu", "600m")}}), podItem(nil, rl("cpu", "1"), nil),
			`pods "x" is forbidden: maximum cpu usage per Pod is 1, but limit is 1200m`},
		{"pod-level resources replace the sum", func() *corev1.Pod {
			p := pod("x", nil, rl("cpu", "100m"))
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3"), Limits: rl("cpu", "3")}
			return p
		}(), podItem(nil, rl("cpu", "2"), nil),
			`pods "x" is forbidden: maximum cpu usage per Pod is 2, but limit is 3`},
		{"pod below min", pod("x", rl("cpu", "10m"), nil), podItem(rl("cpu", "50m"), nil, nil),
			`pods "x" is forbidden: minimum cpu usage per Pod is 50m, but request is 10m`},
		{"pod ratio", pod("x", rl("memory", "100Mi"), rl("memory", "300Mi")), podItem(nil, nil, rl("memory", "2")),
			`pods "x" is forbidden: memory max limit to request ratio per Pod is 2, but provided ratio is 3.000000`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := admitPod(t, tc.pod, tc.lr)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Admit: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("Admit = %v, want 403 Forbidden", err)
			}
			if err.Error() != tc.want {
				t.Errorf("message\n got %s\nwant %s", err.Error(), tc.want)
			}
		})
	}
}

func TestAdmit_Claims_StorageRequestHeldToMinAndMax(t *testing.T) {
	lr := limitRange("storage", corev1.LimitRangeItem{Type: corev1.LimitTypePersistentVolumeClaim,
		Min: rl("storage", "1Gi"), Max: rl("storage", "2Gi")})
	claim := func(size string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"}}
		if size != "" {
			c.Spec.Resources.Requests = rl("storage", size)
		}
		return c
	}
	cases := []struct {
		name  string
		op    apiserver.Operation
		claim *corev1.PersistentVolumeClaim
		want  string
	}{
		{"within range", apiserver.OpCreate, claim("1500Mi"), ""},
		{"below min", apiserver.OpCreate, claim("500Mi"),
			`persistentvolumeclaims "data" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi`},
		{"above max on update", apiserver.OpUpdate, claim("3Gi"),
			`persistentvolumeclaims "data" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 3Gi`},
		{"no request", apiserver.OpCreate, claim(""),
			`persistentvolumeclaims "data" is forbidden: [minimum storage usage per PersistentVolumeClaim is 1Gi.  No request is specified, ` +
				`maximum storage usage per PersistentVolumeClaim is 2Gi.  No request is specified]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := apiserver.AdmissionAttributes{Op: tc.op, Resource: claimsRes, Object: tc.claim}
			if tc.op == apiserver.OpUpdate {
				a.Old = claim("1Gi")
			}
			err := Plugin{LimitRanges: fakeLister{byNS: map[string][]*corev1.LimitRange{"ns": {lr}}}}.Admit(context.Background(), a)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Admit: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || err.Error() != tc.want {
				t.Errorf("Admit = %v, want 403 %s", err, tc.want)
			}
		})
	}
}

func TestAdmit_Attributes_OnlyPodCreateResizeAndClaims(t *testing.T) {
	lr := limitRange("lr", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Max: rl("cpu", "500m"), Default: rl("cpu", "500m"), DefaultRequest: rl("cpu", "100m")})
	big := func() *corev1.Pod { return pod("x", nil, rl("cpu", "1")) }
	deleting := big()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	cases := []struct {
		name       string
		a          apiserver.AdmissionAttributes
		wantRefuse bool
	}{
		{"pod create", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: podsRes, Object: big()}, true},
		{"pod resize", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: podsRes, Subresource: "resize", Object: big(), Old: big()}, true},
		{"pod resize of a pod being deleted", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: podsRes, Subresource: "resize", Object: big(), Old: deleting}, false},
		{"pod update", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: podsRes, Object: big(), Old: big()}, false},
		{"pod status", apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: podsRes, Subresource: "status", Object: big(), Old: big()}, false},
		{"pod delete", apiserver.AdmissionAttributes{Op: apiserver.OpDelete, Resource: podsRes, Old: big()}, false},
		{"pod binding create", apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: podsRes, Subresource: "binding", Object: &corev1.Binding{}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Plugin{LimitRanges: fakeLister{byNS: map[string][]*corev1.LimitRange{"ns": {lr}}}}.Admit(context.Background(), tc.a)
			if got := err != nil; got != tc.wantRefuse {
				t.Errorf("Admit = %v, want refused %v", err, tc.wantRefuse)
			}
		})
	}
}

func TestAdmit_Resize_DefaultsResourcesWithoutAnnotation(t *testing.T) {
	lr := limitRange("lr", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Default: rl("memory", "100Mi"), DefaultRequest: rl("memory", "50Mi")})
	p := pod("x", rl("cpu", "100m"), rl("cpu", "100m"))
	a := apiserver.AdmissionAttributes{Op: apiserver.OpUpdate, Resource: podsRes, Subresource: "resize", Object: p, Old: p.DeepCopy()}
	if err := (Plugin{LimitRanges: fakeLister{byNS: map[string][]*corev1.LimitRange{"ns": {lr}}}}).Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := p.Spec.Containers[0].Resources.Limits; !equalList(got, rl("cpu", "100m", "memory", "100Mi")) {
		t.Errorf("limits = %v", got)
	}
	if _, ok := p.Annotations[Annotation]; ok {
		t.Errorf("resize set the annotation: %v", p.Annotations)
	}
}

func TestAdmit_SeveralLimitRanges_AllApplyLastAnnotationWins(t *testing.T) {
	a := limitRange("a", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("cpu", "200m"), DefaultRequest: rl("cpu", "100m")})
	b := limitRange("b", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("memory", "64Mi"), DefaultRequest: rl("memory", "32Mi"),
		Max: rl("cpu", "150m")})
	p := pod("x", nil, nil)
	err := admitPod(t, p, b, a) // listed out of order: a defaults first, b checks the result
	want := `pods "x" is forbidden: maximum cpu usage per Container is 150m, but limit is 200m`
	if err == nil || err.Error() != want {
		t.Fatalf("Admit = %v, want %s", err, want)
	}
	p = pod("y", nil, nil)
	b.Spec.Limits[0].Max = nil
	if err := admitPod(t, p, b, a); err != nil {
		t.Fatal(err)
	}
	if got := p.Spec.Containers[0].Resources.Requests; !equalList(got, rl("cpu", "100m", "memory", "32Mi")) {
		t.Errorf("requests = %v", got)
	}
	if got, want := p.Annotations[Annotation], "LimitRanger plugin set: memory request for container c; memory limit for container c"; got != want {
		t.Errorf("annotation = %q, want %q", got, want)
	}
}

func TestAdmit_ListerFails_Forbidden(t *testing.T) {
	boom := errors.New("cache down")
	plugin := Plugin{LimitRanges: fakeLister{err: boom}}
	err := plugin.Admit(context.Background(), apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: podsRes, Object: pod("x", nil, nil)})
	want := `pods "x" is forbidden: unable to CREATE /v1, Resource=pods at this time because there was an error enforcing limit ranges: cache down`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("Admit = %v, want 403 %s", err, want)
	}
}

func TestAdmit_Phases_MutateOnlyDefaultsValidateOnlyChecks(t *testing.T) {
	lr := limitRange("lr", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Max: rl("cpu", "500m"), Default: rl("cpu", "500m"), DefaultRequest: rl("cpu", "100m")})
	lister := fakeLister{byNS: map[string][]*corev1.LimitRange{"ns": {lr}}}
	cases := []struct {
		name        string
		phase       Phase
		pod         *corev1.Pod
		wantRefused bool
		wantLimits  corev1.ResourceList
	}{
		{"mutate defaults", Mutate, pod("a", nil, nil), false, rl("cpu", "500m")},
		{"mutate does not check", Mutate, pod("b", nil, rl("cpu", "1")), false, rl("cpu", "1")},
		{"validate does not default", Validate, pod("c", rl("cpu", "100m"), nil), true, nil},
		{"validate checks", Validate, pod("d", nil, rl("cpu", "1")), true, rl("cpu", "1")},
		{"both defaults then checks", Both, pod("e", rl("cpu", "100m"), nil), false, rl("cpu", "500m")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Plugin{LimitRanges: lister, Phase: tc.phase}.Admit(context.Background(),
				apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: podsRes, Object: tc.pod})
			if got := err != nil; got != tc.wantRefused {
				t.Errorf("Admit = %v, want refused %v", err, tc.wantRefused)
			}
			if got := tc.pod.Spec.Containers[0].Resources.Limits; !equalList(got, tc.wantLimits) {
				t.Errorf("limits = %v, want %v", got, tc.wantLimits)
			}
		})
	}
}
