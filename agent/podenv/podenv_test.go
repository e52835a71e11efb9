package podenv

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "B": "b", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	tests := []struct{ name, in, want string }{
		{"plain", "hello", "hello"},
		{"defined reference", "x-$(A)-y", "x-a-y"},
		{"two references", "$(A)$(B)", "ab"},
		{"defined empty", "[$(EMPTY)]", "[]"},
		{"undefined stays literal", "$(NOPE)", "$(NOPE)"},
		{"escaped reference", "$$(A)", "$(A)"},
		{"escaped dollar", "cost $$5", "cost $5"},
		{"double escape then reference", "$$$(A)", "$a"},
		{"lone dollar kept", "a$b", "a$b"},
		{"trailing dollar kept", "a$", "a$"},
		{"unterminated reference kept", "$(A", "$(A"},
		{"empty name", "$()", "$()"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Expand(tt.in, lookup); got != tt.want {
				t.Fatalf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func bp(b bool) *bool { return &b }

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", UID: "uid-1",
			Labels: map[string]string{"app": "web", "tier": "fe"}, Annotations: map[string]string{"note": "a \"b\""}},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "sa1",
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("128Mi")}}}}},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.42.0.5"}, {IP: "fd00::5"}}},
	}
}

func objects() *fake.Clientset {
	return fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns1"},
			Data: map[string]string{"HOST": "db", "PORT": "5432", "bad=key": "x", "bad\tkey": "x", "bädkey": "x", "1NUM": "n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg2", Namespace: "ns1"}, Data: map[string]string{"PORT": "6000"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns1"}, Data: map[string][]byte{"PASSWORD": []byte("s3cret")}},
	)
}

func ev(name, val string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: val} }

func TestResolve(t *testing.T) {
	cmKey := func(name, key string, opt bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: bp(opt)}}
	}
	secKey := func(name, key string, opt bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: bp(opt)}}
	}
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	resField := func(r, div string) *corev1.EnvVarSource {
		s := &corev1.ResourceFieldSelector{Resource: r}
		if div != "" {
			s.Divisor = resource.MustParse(div)
		}
		return &corev1.EnvVarSource{ResourceFieldRef: s}
	}
	tests := []struct {
		name    string
		envFrom []corev1.EnvFromSource
		env     []corev1.EnvVar
		want    []string
		wantErr string
	}{
		{name: "expansion uses earlier vars only and $$ escapes",
			env:  []corev1.EnvVar{ev("A", "x"), ev("B", "$(A)-$(C)"), ev("C", "c"), ev("D", "$$(A)"), ev("E", "")},
			want: []string{"A=x", "B=x-$(C)", "C=c", "D=$(A)", "E="}},
		{name: "envFrom with prefix skips keys that are not variable names and later sources override",
			envFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
				{Prefix: "DB_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg2"}}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
			},
			env:  []corev1.EnvVar{ev("URL", "$(HOST):$(PORT)"), ev("HOST", "override")},
			want: []string{"1NUM=n", "HOST=override", "PORT=6000", "DB_1NUM=n", "DB_HOST=db", "DB_PORT=5432", "PASSWORD=s3cret", "URL=db:6000"}},
		{name: "optional missing envFrom sources are skipped",
			envFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: bp(true)}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: bp(true)}},
			},
			want: []string{}},
		{name: "missing non-optional envFrom configmap names it",
			envFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}}},
			wantErr: `couldn't get configMap ns1/nope: configmaps "nope" not found`},
		{name: "key refs, optional ones skipped",
			env: []corev1.EnvVar{
				{Name: "H", ValueFrom: cmKey("cfg", "HOST", false)},
				{Name: "P", ValueFrom: secKey("sec", "PASSWORD", false)},
				{Name: "O1", ValueFrom: cmKey("cfg", "missing", true)},
				{Name: "O2", ValueFrom: cmKey("nope", "k", true)},
				{Name: "O3", ValueFrom: secKey("sec", "missing", true)},
				{Name: "O4", ValueFrom: secKey("nope", "k", true)},
			},
			want: []string{"H=db", "P=s3cret"}},
		{name: "missing configmap key names it", env: []corev1.EnvVar{{Name: "X", ValueFrom: cmKey("cfg", "missing", false)}},
			wantErr: "couldn't find key missing in ConfigMap ns1/cfg"},
		{name: "missing secret key names it", env: []corev1.EnvVar{{Name: "X", ValueFrom: secKey("sec", "missing", false)}},
			wantErr: "couldn't find key missing in Secret ns1/sec"},
		{name: "missing secret names it", env: []corev1.EnvVar{{Name: "X", ValueFrom: secKey("nope", "k", false)}},
			wantErr: `couldn't get secret ns1/nope: secrets "nope" not found`},
		{name: "downward API fields",
			env: []corev1.EnvVar{
				{Name: "N", ValueFrom: field("metadata.name")}, {Name: "NS", ValueFrom: field("metadata.namespace")},
				{Name: "U", ValueFrom: field("metadata.uid")}, {Name: "L", ValueFrom: field("metadata.labels['app']")},
				{Name: "AN", ValueFrom: field("metadata.annotations['note']")}, {Name: "NODE", ValueFrom: field("spec.nodeName")},
				{Name: "SA", ValueFrom: field("spec.serviceAccountName")}, {Name: "HIP", ValueFrom: field("status.hostIP")},
				{Name: "PIP", ValueFrom: field("status.podIP")}, {Name: "PIPS", ValueFrom: field("status.podIPs")},
				{Name: "LS", ValueFrom: field("metadata.labels")},
				{Name: "MSG", Value: "$(N) on $(NODE)"},
			},
			want: []string{"N=web", "NS=ns1", "U=uid-1", "L=web", `AN=a "b"`, "NODE=node-a", "SA=sa1", "HIP=192.168.1.2",
				"PIP=10.42.0.5", "PIPS=10.42.0.5,fd00::5", "LS=app=\"web\"\ntier=\"fe\"", "MSG=web on node-a"}},
		{name: "unsupported field is an error", env: []corev1.EnvVar{{Name: "X", ValueFrom: field("spec.bogus")}},
			wantErr: `env X: unsupported downward API field: fieldPath "spec.bogus"`},
		{name: "resource fields with divisors round up",
			env: []corev1.EnvVar{
				{Name: "LC", ValueFrom: resField("limits.cpu", "")}, {Name: "LCM", ValueFrom: resField("limits.cpu", "1m")},
				{Name: "RC", ValueFrom: resField("requests.cpu", "")}, {Name: "LM", ValueFrom: resField("limits.memory", "1Mi")},
				{Name: "RM", ValueFrom: resField("requests.memory", "")}, {Name: "LE", ValueFrom: resField("limits.ephemeral-storage", "")},
			},
			want: []string{"LC=2", "LCM=1500", "RC=1", "LM=128", "RM=67108864", "LE=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.Containers[0].EnvFrom = tt.envFrom
			pod.Spec.Containers[0].Env = tt.env
			got, err := Resolve(context.Background(), ClientGetter{objects()}, pod, &pod.Spec.Containers[0], "", "192.168.1.2")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrConfig) {
					t.Fatalf("err = %v, want one containing %q wrapping ErrConfig", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestResolveLimitDefaultsToAllocatable(t *testing.T) {
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{}
	c.Env = []corev1.EnvVar{{Name: "LC", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}
	got, err := ResolveWithOptions(context.Background(), ClientGetter{objects()}, pod, c, "", "",
		Options{NodeAllocatable: corev1.ResourceList{"cpu": resource.MustParse("4")}})
	if err != nil || !reflect.DeepEqual(got, []string{"LC=4"}) {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestResolveKubernetesServiceVars(t *testing.T) {
	cs := objects()
	_, err := cs.CoreV1().Services("default").Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.43.0.1", Ports: []corev1.ServicePort{
			{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{ev("API", "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"), ev("KUBERNETES_PORT", "mine")}
	got, err := Resolve(context.Background(), ClientGetter{cs}, pod, c, "10.42.0.5", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"API=https://10.43.0.1:443",
		"KUBERNETES_PORT=mine",
		"KUBERNETES_SERVICE_HOST=10.43.0.1",
		"KUBERNETES_SERVICE_PORT=443",
		"KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT_443_TCP=tcp://10.43.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_PORT_443_TCP_PORT=443",
		"KUBERNETES_PORT_443_TCP_ADDR=10.43.0.1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestIsEnvVarName(t *testing.T) {
	for name, want := range map[string]bool{"A": true, "a.b-c_d": true, "_X1": true, "1A": true, "a b": true, "": false, "a=b": false, "a\nb": false, "é": false} {
		if got := IsEnvVarName(name); got != want {
			t.Errorf("IsEnvVarName(%q) = %v", name, got)
		}
	}
}

func TestExpandCommand(t *testing.T) {
	env := []string{"A=1", "B=two words", "A=3"}
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"nil stays nil so the image defaults apply", nil, nil},
		{"references expanded, later env entry wins", []string{"echo", "$(A)", "$(B)"}, []string{"echo", "3", "two words"}},
		{"undefined and escaped stay literal", []string{"$(NOPE)", "$$(A)"}, []string{"$(NOPE)", "$(A)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExpandCommand(tt.in, env); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q want %q", got, tt.want)
			}
		})
	}
}

func TestExpandSubPath(t *testing.T) {
	env := []string{"POD=web-0", "EMPTY="}
	tests := []struct{ name, in, want, wantErr string }{
		{"expanded", "logs/$(POD)", "logs/web-0", ""},
		{"undefined is an error", "logs/$(NOPE)", "", "missing value for NOPE"},
		{"empty is an error", "$(EMPTY)/x", "", "missing value for EMPTY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandSubPath(tt.in, env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}

func svc(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestResolve_ServiceLinks_Table(t *testing.T) {
	port := func(p int32) corev1.ServicePort { return corev1.ServicePort{Port: p, Protocol: corev1.ProtocolTCP} }
	services := []runtime.Object{
		svc("default", "kubernetes", "10.43.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		svc("ns1", "fooservice", "10.43.0.20", port(8765)),
		svc("ns1", "headless", corev1.ClusterIPNone, port(80)),
		svc("ns1", "external", "", port(80)),
		svc("other", "elsewhere", "10.43.0.30", port(80)),
	}
	fooVars := []string{
		"FOOSERVICE_SERVICE_HOST=10.43.0.20", "FOOSERVICE_SERVICE_PORT=8765", "FOOSERVICE_PORT=tcp://10.43.0.20:8765",
		"FOOSERVICE_PORT_8765_TCP=tcp://10.43.0.20:8765", "FOOSERVICE_PORT_8765_TCP_PROTO=tcp",
		"FOOSERVICE_PORT_8765_TCP_PORT=8765", "FOOSERVICE_PORT_8765_TCP_ADDR=10.43.0.20",
	}
	f := false
	tests := []struct {
		name    string
		links   *bool
		extra   []runtime.Object
		want    []string // must be present
		wantNot []string // prefixes that must be absent
	}{
		{name: "services of the pod's namespace by default", want: append([]string{"KUBERNETES_SERVICE_HOST=10.43.0.1"}, fooVars...),
			wantNot: []string{"HEADLESS_", "EXTERNAL_", "ELSEWHERE_"}},
		{name: "enableServiceLinks false keeps only kubernetes", links: &f,
			want: []string{"KUBERNETES_SERVICE_HOST=10.43.0.1"}, wantNot: []string{"FOOSERVICE_"}},
		{name: "a kubernetes Service of the pod's namespace wins", extra: []runtime.Object{svc("ns1", "kubernetes", "10.43.0.99", port(80))},
			want: []string{"KUBERNETES_SERVICE_HOST=10.43.0.99", "KUBERNETES_SERVICE_PORT=80"}, wantNot: []string{"KUBERNETES_SERVICE_PORT_HTTPS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(append(services, tt.extra...)...)
			pod := testPod()
			pod.Spec.EnableServiceLinks = tt.links
			got, err := Resolve(context.Background(), ClientGetter{cs}, pod, &pod.Spec.Containers[0], "", "")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %q in %q", w, got)
				}
			}
			for _, kv := range got {
				for _, p := range tt.wantNot {
					if strings.HasPrefix(kv, p) {
						t.Errorf("unexpected %q", kv)
					}
				}
			}
		})
	}
}

func TestResolve_ServicesUnreadable_ConfigError(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	pod := testPod()
	_, err := Resolve(context.Background(), ClientGetter{cs}, pod, &pod.Spec.Containers[0], "", "")
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "failed to list services") {
		t.Fatalf("err = %v", err)
	}
	// A static pod starts without them instead.
	pod.Annotations["kubernetes.io/config.source"] = "file"
	pod.Spec.Containers[0].Env = []corev1.EnvVar{ev("A", "a")}
	got, err := Resolve(context.Background(), ClientGetter{cs}, pod, &pod.Spec.Containers[0], "", "")
	if err != nil || !reflect.DeepEqual(got, []string{"A=a"}) {
		t.Fatalf("static pod: got %q, %v", got, err)
	}
}

func TestResolve_LimitDefaults_Table(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		"cpu": resource.MustParse("3"), "memory": resource.MustParse("2Gi"), "ephemeral-storage": resource.MustParse("10Gi")}}}
	res := func(r, div string) corev1.EnvVar {
		s := &corev1.ResourceFieldSelector{Resource: r}
		if div != "" {
			s.Divisor = resource.MustParse(div)
		}
		return corev1.EnvVar{Name: strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(r)), ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: s}}
	}
	env := []corev1.EnvVar{res("limits.cpu", ""), res("limits.memory", "1Mi"), res("limits.ephemeral-storage", "1Gi")}
	tests := []struct {
		name     string
		limits   corev1.ResourceList
		podLimit corev1.ResourceList
		nodes    []runtime.Object
		want     []string
		wantErr  string
	}{
		{name: "unset limits read the node's allocatable", nodes: []runtime.Object{node},
			want: []string{"LIMITS_CPU=3", "LIMITS_MEMORY=2048", "LIMITS_EPHEMERAL_STORAGE=10"}},
		{name: "zero limits read the node's allocatable", nodes: []runtime.Object{node},
			limits: corev1.ResourceList{"cpu": resource.MustParse("0"), "memory": resource.MustParse("0")},
			want:   []string{"LIMITS_CPU=3", "LIMITS_MEMORY=2048", "LIMITS_EPHEMERAL_STORAGE=10"}},
		{name: "pod-level limits cap cpu and memory", nodes: []runtime.Object{node},
			podLimit: corev1.ResourceList{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("512Mi")},
			want:     []string{"LIMITS_CPU=2", "LIMITS_MEMORY=512", "LIMITS_EPHEMERAL_STORAGE=10"}},
		{name: "set limits need no node",
			limits: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("64Mi"), "ephemeral-storage": resource.MustParse("1Gi")},
			want:   []string{"LIMITS_CPU=1", "LIMITS_MEMORY=64", "LIMITS_EPHEMERAL_STORAGE=1"}},
		{name: "a missing node is an error", wantErr: "failed to find node object node-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Resources = corev1.ResourceRequirements{Limits: tt.limits}
			if tt.podLimit != nil {
				pod.Spec.Resources = &corev1.ResourceRequirements{Limits: tt.podLimit}
			}
			c.Env = env
			got, err := ResolveWithOptions(context.Background(), ClientGetter{fake.NewClientset(tt.nodes...)}, pod, c, "", "", Options{NodeName: "node-a"})
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
