package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/auth"
)

type fakeGraph struct {
	pods []*corev1.Pod
}

func (g *fakeGraph) PodsOnNode(_ context.Context, node string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, p := range g.pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

func (g *fakeGraph) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	for _, p := range g.pods {
		if p.Namespace == ns && p.Name == name {
			return p, nil
		}
	}
	return nil, nil
}

func (g *fakeGraph) Sync(context.Context) error { return nil }

// rbacSays stands in for RBAC: it allows everything, so a test sees
// whether the node authorizer's denials are final.
type rbacSays struct{ asked int }

func (r *rbacSays) Authorize(context.Context, auth.Attributes) (bool, string, error) {
	r.asked++
	return true, "rbac", nil
}

func fixturePods() []*corev1.Pod {
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}, Spec: corev1.PodSpec{
		NodeName:           "n1",
		ServiceAccountName: "web-sa",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "regcred"}},
		Volumes: []corev1.Volume{
			{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls"}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "web-data"}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "projected-secret"}}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-env"}}}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db-password"}, Key: "pw"}}}}}},
	}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "other"}, Spec: corev1.PodSpec{
		NodeName: "n2", ServiceAccountName: "other-sa",
		Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other-secret"}}}},
	}}
	return []*corev1.Pod{web, other}
}

func TestNodeAuthorizer(t *testing.T) {
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{auth.GroupNodes, auth.GroupAuthenticated}}
	res := func(verb, group, resource, sub, ns, name string) auth.Attributes {
		return auth.Attributes{User: n1, Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	tests := []struct {
		name  string
		attrs auth.Attributes
		want  Decision
	}{
		{"read every node", res("list", "", "nodes", "", "", ""), Allow},
		{"register itself", res("create", "", "nodes", "", "", ""), Allow},
		{"update its own node", res("update", "", "nodes", "", "", "n1"), Allow},
		{"patch its own node status", res("patch", "", "nodes", "status", "", "n1"), Allow},
		{"update another node", res("update", "", "nodes", "", "", "n2"), Deny},
		{"update another node's status", res("update", "", "nodes", "status", "", "n2"), Deny},
		{"delete another node", res("delete", "", "nodes", "", "", "n2"), Deny},
		{"renew its own lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), Allow},
		{"create its lease", res("create", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), Allow},
		{"update another node's lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2"), Deny},
		{"list leases", res("list", "coordination.k8s.io", "leases", "", "kube-node-lease", ""), Deny},
		{"a lease elsewhere", res("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"), Deny},
		{"watch pods", res("watch", "", "pods", "", "", ""), Allow},
		{"create a (mirror) pod", res("create", "", "pods", "", "app", ""), Allow},
		{"update status of its pod", res("update", "", "pods", "status", "app", "web"), Allow},
		{"update status of another node's pod", res("update", "", "pods", "status", "app", "other"), Deny},
		{"delete its pod", res("delete", "", "pods", "", "app", "web"), Allow},
		{"delete another node's pod", res("delete", "", "pods", "", "app", "other"), Deny},
		{"evict its pod", res("create", "", "pods", "eviction", "app", "web"), Allow},
		{"evict a pod that does not exist", res("create", "", "pods", "eviction", "app", "ghost"), Deny},
		{"update a pod's spec", res("update", "", "pods", "", "app", "web"), Deny},
		{"secret in a volume of its pod", res("get", "", "secrets", "", "app", "web-tls"), Allow},
		{"secret in env of its pod", res("get", "", "secrets", "", "app", "db-password"), Allow},
		{"image pull secret of its pod", res("get", "", "secrets", "", "app", "regcred"), Allow},
		{"projected secret of its pod", res("watch", "", "secrets", "", "app", "projected-secret"), Allow},
		{"projected configmap of its pod", res("get", "", "configmaps", "", "app", "kube-root-ca.crt"), Allow},
		{"envFrom configmap of an init container", res("get", "", "configmaps", "", "app", "init-env"), Allow},
		{"pvc of its pod", res("get", "", "persistentvolumeclaims", "", "app", "web-data"), Allow},
		{"secret used only by another node's pod", res("get", "", "secrets", "", "app", "other-secret"), Deny},
		{"same secret name in another namespace", res("get", "", "secrets", "", "other", "web-tls"), Deny},
		{"list all secrets", res("list", "", "secrets", "", "app", ""), Deny},
		{"update a secret its pod uses", res("update", "", "secrets", "", "app", "web-tls"), Deny},
		{"unrelated configmap", res("get", "", "configmaps", "", "kube-system", "coredns"), Deny},
		{"token for its pod's service account", res("create", "", "serviceaccounts", "token", "app", "web-sa"), Allow},
		{"token for another node's service account", res("create", "", "serviceaccounts", "token", "app", "other-sa"), Deny},
		{"read services", res("list", "", "services", "", "", ""), Allow},
		{"read endpointslices", res("watch", "discovery.k8s.io", "endpointslices", "", "", ""), Allow},
		{"create events", res("create", "", "events", "", "app", ""), Allow},
		{"create a CSR", res("create", "certificates.k8s.io", "certificatesigningrequests", "", "", ""), Allow},
		{"create a tokenreview", res("create", "authentication.k8s.io", "tokenreviews", "", "", ""), Allow},
		{"create a subjectaccessreview", res("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""), Allow},
		{"something it has no rule for goes to RBAC", res("list", "node.k8s.io", "runtimeclasses", "", "", ""), NoOpinion},
		{"non-resource path goes to RBAC", auth.Attributes{User: n1, Verb: "get", Path: "/version"}, NoOpinion},
		{"other users go to RBAC", auth.Attributes{User: &auth.User{Name: "alice"}, Verb: "get", ResourceRequest: true, Resource: "secrets", Namespace: "app", Name: "other-secret"}, NoOpinion},
		{"a node name without the nodes group goes to RBAC", auth.Attributes{User: &auth.User{Name: "system:node:n1"}, Verb: "get", ResourceRequest: true, Resource: "secrets", Namespace: "app", Name: "other-secret"}, NoOpinion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeGraph{pods: fixturePods()}
			next := &rbacSays{}
			a := New(g, next)
			d, reason, err := a.Decide(context.Background(), tt.attrs)
			if err != nil || d != tt.want {
				t.Fatalf("Decide = %v (%s), %v; want %v", d, reason, err, tt.want)
			}
			allowed, _, _ := a.Authorize(context.Background(), tt.attrs)
			if want := tt.want != Deny; allowed != want {
				t.Fatalf("Authorize = %v, want %v (RBAC allows everything here)", allowed, want)
			}
			if tt.want == Deny && next.asked != 0 {
				t.Fatal("a denial was handed to RBAC: it must be final")
			}
		})
	}
}

func TestADenialWaitsForThePodJustBound(t *testing.T) {
	g := &lateGraph{fakeGraph: fakeGraph{}}
	a := New(g, &rbacSays{})
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{auth.GroupNodes}}
	allowed, reason, err := a.Authorize(context.Background(), auth.Attributes{User: n1, Verb: "get", ResourceRequest: true, Resource: "secrets", Namespace: "app", Name: "web-tls"})
	if err != nil || !allowed {
		t.Fatalf("Authorize = %v %q %v; want allowed once the cache caught up", allowed, reason, err)
	}
}

// lateGraph learns of the pods only on Sync, like a lagging watch cache.
type lateGraph struct{ fakeGraph }

func (g *lateGraph) Sync(context.Context) error { g.pods = fixturePods(); return nil }
