package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// tokenServer answers TokenRequests with numbered tokens and records them.
type tokenServer struct {
	mu   sync.Mutex
	reqs []*authv1.TokenRequest
	sa   []string
	fail bool
	now  func() time.Time
}

func (s *tokenServer) react(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "token" {
		return false, nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return true, nil, errors.New("apiserver down")
	}
	ca := a.(k8stesting.CreateActionImpl)
	req := ca.GetObject().(*authv1.TokenRequest).DeepCopy()
	s.reqs = append(s.reqs, req)
	s.sa = append(s.sa, ca.Name)
	req.Status.Token = fmt.Sprintf("token-%d", len(s.reqs))
	req.Status.ExpirationTimestamp = metav1.NewTime(s.now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return true, req, nil
}

func (s *tokenServer) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.reqs) }

func projectedPod(exp *int64) *corev1.Pod {
	return newPod(corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: i32(0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", Audience: "api", ExpirationSeconds: exp}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}})
}

func TestProjectedServiceAccountToken(t *testing.T) {
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns1"}, Data: map[string]string{"ca.crt": "CA"}}
	tests := []struct {
		name string
		exp  *int64
		// steps advance the clock and say whether a new token is expected.
		steps []struct {
			after time.Duration
			fresh bool
		}
	}{
		{name: "default 1h token refreshed after 80% of its life", exp: nil, steps: []struct {
			after time.Duration
			fresh bool
		}{{30 * time.Minute, false}, {17 * time.Minute, false}, {2 * time.Minute, true}, {47 * time.Minute, false}, {2 * time.Minute, true}}},
		{name: "48h token refreshed after 24h", exp: i64(48 * 3600), steps: []struct {
			after time.Duration
			fresh bool
		}{{23 * time.Hour, false}, {61 * time.Minute, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, cs, clk := newTestManager(t, ca)
			srv := &tokenServer{now: clk.Now}
			cs.PrependReactor("create", "serviceaccounts", srv.react)
			pod := projectedPod(tt.exp)
			vols, err := m.Setup(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			dir := vols["kube-api-access"]
			if !strings.HasSuffix(dir, "kubernetes.io~projected/kube-api-access") {
				t.Fatalf("dir %s", dir)
			}
			for p, want := range map[string]string{"token": "token-1", "ca.crt": "CA", "namespace": "ns1"} {
				if got := readFile(t, filepath.Join(dir, p)); got != want {
					t.Fatalf("%s = %q want %q", p, got, want)
				}
			}
			req := srv.reqs[0]
			wantExp := int64(3600)
			if tt.exp != nil {
				wantExp = *tt.exp
			}
			if srv.sa[0] != "sa1" || *req.Spec.ExpirationSeconds != wantExp || strings.Join(req.Spec.Audiences, ",") != "api" {
				t.Fatalf("request for %s: %+v", srv.sa[0], req.Spec)
			}
			if b := req.Spec.BoundObjectRef; b == nil || b.Kind != "Pod" || b.Name != "web" || b.UID != "uid-1" {
				t.Fatalf("bound object %+v", b)
			}
			want := 1
			for i, st := range tt.steps {
				clk.Add(st.after)
				if _, err := m.Setup(ctx, pod); err != nil {
					t.Fatal(err)
				}
				if st.fresh {
					want++
				}
				if srv.count() != want {
					t.Fatalf("step %d: %d token requests, want %d", i, srv.count(), want)
				}
				if got := readFile(t, filepath.Join(dir, "token")); got != fmt.Sprintf("token-%d", want) {
					t.Fatalf("step %d: token file %q", i, got)
				}
			}
		})
	}
}

func TestTokenFileOwnership(t *testing.T) {
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns1"}, Data: map[string]string{"ca.crt": "CA"}}
	tests := []struct {
		name    string
		podUser *int64
		ctrUser *int64
		fsGroup *int64
		mode    os.FileMode
		uid     uint32
		gid     uint32
	}{
		{name: "no user: defaultMode", mode: 0o644},
		{name: "one user for all containers: 0600 owned by it", podUser: i64(1000), mode: 0o600, uid: 1000},
		{name: "containers differ: defaultMode", podUser: i64(1000), ctrUser: i64(2000), mode: 0o644},
		{name: "fsGroup: 0640 group-owned", fsGroup: i64(3000), mode: 0o640, gid: 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, cs, clk := newTestManager(t, ca)
			cs.PrependReactor("create", "serviceaccounts", (&tokenServer{now: clk.Now}).react)
			pod := projectedPod(nil)
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tt.podUser, FSGroup: tt.fsGroup}
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side"})
			if tt.ctrUser != nil {
				pod.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsUser: tt.ctrUser}
			}
			vols, err := m.Setup(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(filepath.Join(vols["kube-api-access"], "token"))
			if err != nil {
				t.Fatal(err)
			}
			st := info.Sys().(*syscall.Stat_t)
			if info.Mode().Perm() != tt.mode || st.Uid != tt.uid || st.Gid != tt.gid {
				t.Fatalf("token %o %d:%d, want %o %d:%d", info.Mode().Perm(), st.Uid, st.Gid, tt.mode, tt.uid, tt.gid)
			}
			ca, _ := os.Stat(filepath.Join(vols["kube-api-access"], "ca.crt"))
			if tt.fsGroup == nil && ca.Mode().Perm() != 0o644 {
				t.Fatalf("ca.crt mode %o", ca.Mode().Perm())
			}
		})
	}
}

func TestTokenRefreshFailureKeepsValidToken(t *testing.T) {
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns1"}, Data: map[string]string{"ca.crt": "CA"}}
	m, cs, clk := newTestManager(t, ca)
	srv := &tokenServer{now: clk.Now}
	cs.PrependReactor("create", "serviceaccounts", srv.react)
	pod := projectedPod(nil)
	if _, err := m.Setup(ctx, pod); err != nil {
		t.Fatal(err)
	}
	srv.fail = true
	clk.Add(50 * time.Minute)
	vols, err := m.Setup(ctx, pod)
	if err != nil {
		t.Fatalf("refresh failure with a valid token: %v", err)
	}
	if got := readFile(t, filepath.Join(vols["kube-api-access"], "token")); got != "token-1" {
		t.Fatalf("token %q", got)
	}
	clk.Add(11 * time.Minute)
	_, err = m.Setup(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), `volume "kube-api-access"`) || !strings.Contains(err.Error(), "apiserver down") {
		t.Fatalf("expired token error = %v", err)
	}
	// Teardown forgets the pod's tokens.
	srv.fail = false
	if err := m.Teardown(ctx, "uid-1"); err != nil {
		t.Fatal(err)
	}
	if len(m.tokens) != 0 {
		t.Fatalf("tokens kept after teardown: %d", len(m.tokens))
	}
}
