package apiserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
	"skiff/server/auth/serviceaccount"
)

// saIssuer adapts the service-account issuer as the server wires it.
type saIssuer struct{ i *serviceaccount.Issuer }

func (s saIssuer) IssueToken(r apiserver.TokenRequest) (string, time.Time, error) {
	return s.i.Issue(serviceaccount.Request{
		Namespace: r.Namespace, ServiceAccount: r.ServiceAccount, ServiceAccountUID: r.ServiceAccountUID,
		Audiences: r.Audiences, Expiration: r.Expiration, PodName: r.PodName, PodUID: r.PodUID,
		NodeName: r.NodeName, NodeUID: r.NodeUID,
	})
}

// tokensOrAdmin authenticates bearer tokens with v, anything else as an admin.
type tokensOrAdmin struct{ v *serviceaccount.Validator }

func (a tokensOrAdmin) Authenticate(r *http.Request) (*auth.User, error) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return a.v.Validate(r.Context(), tok)
	}
	return testAdmin{}.Authenticate(r)
}

// TestTokenRequest_BoundToPod_CarriesItsNode: a token bound to a pod
// names the pod's node, and the token's user carries pod, node and
// credential in its extra, as upstream's bound tokens do.
func TestTokenRequest_BoundToPod_CarriesItsNode(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := apitest.Start(t, apitest.Options{
		Authenticator: tokensOrAdmin{serviceaccount.NewValidator(key.Public(), "", []string{"api"}, nil)},
		Tokens:        saIssuer{serviceaccount.NewIssuer(key, "")},
	})
	srv := httptest.NewServer(s.API.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1, Timeout: 30 * time.Second})
	ctx := context.Background()
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ServiceAccounts("ns").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		NodeName: "n1", ServiceAccountName: "sa", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts("ns").CreateToken(ctx, "sa", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:      []string{"api"},
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated {
		t.Fatalf("token not authenticated: %s", review.Status.Error)
	}
	extra := review.Status.User.Extra
	for key, want := range map[string]string{
		serviceaccount.ExtraPodName: "p", serviceaccount.ExtraPodUID: string(pod.UID),
		serviceaccount.ExtraNodeName: "n1", serviceaccount.ExtraNodeUID: string(node.UID),
	} {
		if v := extra[key]; len(v) != 1 || v[0] != want {
			t.Errorf("extra %s = %v, want [%s]", key, v, want)
		}
	}
	if v := extra[serviceaccount.ExtraCredentialID]; len(v) != 1 || !strings.HasPrefix(v[0], "JTI=") {
		t.Errorf("extra %s = %v, want one JTI=", serviceaccount.ExtraCredentialID, v)
	}
}
