package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
)

// namedCaller authenticates as X-Test-User when set (an ordinary user),
// else as a cluster admin.
type namedCaller struct{}

func (namedCaller) Authenticate(r *http.Request) (*auth.User, error) {
	if name := r.Header.Get("X-Test-User"); name != "" {
		return &auth.User{Name: name, Groups: []string{auth.GroupAuthenticated}}, nil
	}
	return &auth.User{Name: "admin", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}, nil
}

// smallPolicy allows masters everything, everyone to review themselves,
// and the service account default:reader to list configmaps; nothing else.
type smallPolicy struct{}

func (smallPolicy) Authorize(_ context.Context, a auth.Attributes) (bool, string, error) {
	switch {
	case a.User.InGroup(auth.GroupMasters):
		return true, "", nil
	case a.Verb == "create" && a.Resource == "selfsubjectreviews":
		return true, "", nil
	case a.User.Name == "system:serviceaccount:default:reader" && a.Verb == "list" && a.Resource == "configmaps" &&
		slices.Contains(a.User.Groups, auth.GroupServiceAccounts):
		return true, "", nil
	}
	return false, "", nil
}

func newPolicyServer(t *testing.T) *rest.Config {
	t.Helper()
	s := apitest.Start(t, apitest.Options{Authenticator: namedCaller{}, Authorizer: smallPolicy{}})
	srv := httptest.NewServer(s.API.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	cfg := &rest.Config{Host: srv.URL, QPS: -1, Timeout: 30 * time.Second}
	body := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}}`
	resp, err := http.Post(srv.URL+"/api/v1/namespaces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return cfg
}

// TestSubjectAccessReview_AgreesWithImpersonatedRequest: a review of what
// a user may do answers what the user's own request (made through
// impersonation, as kubectl --as does) gets.
func TestSubjectAccessReview_AgreesWithImpersonatedRequest(t *testing.T) {
	cfg := newPolicyServer(t)
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	saGroups := []string{auth.GroupAuthenticated, auth.GroupServiceAccounts, auth.GroupServiceAccounts + ":default"}
	for _, tc := range []struct {
		user string
		want bool
	}{{"system:serviceaccount:default:e2e", false}, {"system:serviceaccount:default:reader", true}} {
		t.Run(tc.user, func(t *testing.T) {
			sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps", Namespace: "default", Version: "v1"},
				User:               tc.user, Groups: saGroups, UID: "uid-1",
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			as := rest.CopyConfig(cfg)
			as.Impersonate = rest.ImpersonationConfig{UserName: tc.user, UID: "uid-1", Groups: saGroups}
			_, reqErr := kubernetes.NewForConfigOrDie(as).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if reqErr != nil && !apierrors.IsForbidden(reqErr) {
				t.Fatalf("impersonated list: %v", reqErr)
			}
			if got := reqErr == nil; got != tc.want || sar.Status.Allowed != tc.want {
				t.Errorf("request allowed %v, review allowed %v, want both %v", got, sar.Status.Allowed, tc.want)
			}
		})
	}
}

func TestImpersonation_ChecksAndSetsTheUser(t *testing.T) {
	cfg := newPolicyServer(t)
	ctx := context.Background()
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:default:reader", UID: "u-9",
		Extra: map[string][]string{"example.com/scope": {"a"}}}
	review, err := kubernetes.NewForConfigOrDie(as).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := review.Status.UserInfo
	wantGroups := []string{auth.GroupServiceAccounts, auth.GroupServiceAccounts + ":default", auth.GroupAuthenticated}
	if u.Username != "system:serviceaccount:default:reader" || u.UID != "u-9" || !slices.Equal(u.Groups, wantGroups) ||
		!slices.Equal(u.Extra["example.com/scope"], []string{"a"}) {
		t.Errorf("impersonated user = %+v, want the service account with its groups, uid and extra", u)
	}

	for _, tc := range []struct {
		name    string
		headers map[string]string
		code    int
	}{
		{"caller not allowed to impersonate", map[string]string{"X-Test-User": "bob", "Impersonate-User": "alice"}, http.StatusForbidden},
		{"group without a user", map[string]string{"Impersonate-Group": "system:masters"}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/api/v1/namespaces/default/configmaps", nil)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var st metav1.Status
			json.NewDecoder(resp.Body).Decode(&st)
			if resp.StatusCode != tc.code || st.Kind != "Status" {
				t.Errorf("got %d %+v, want a %d Status", resp.StatusCode, st, tc.code)
			}
		})
	}
}

// TestReview_TableAccept_Is406: a review has no Table rendering; asking
// for one alone is Not Acceptable, with a plain fallback it is served.
func TestReview_TableAccept_Is406(t *testing.T) {
	h := newHarness(t)
	body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"nonResourceAttributes":{"path":"/","verb":"get"}}}`
	for _, tc := range []struct {
		accept string
		code   int
	}{
		{"application/json;as=Table;v=v1;g=meta.k8s.io", http.StatusNotAcceptable},
		{"application/json;as=Table;v=v1;g=meta.k8s.io, application/json", http.StatusCreated},
		{"", http.StatusCreated},
	} {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("Accept %q: %d, want %d", tc.accept, resp.StatusCode, tc.code)
		}
	}
}
