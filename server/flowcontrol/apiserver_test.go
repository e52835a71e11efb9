package flowcontrol_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientflowcontrol "k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"skiff/server/apiserver"
	"skiff/server/apiserver/apitest"
	"skiff/server/auth"
	"skiff/server/flowcontrol"
)

type allowAll struct{}

func (allowAll) Authorize(context.Context, auth.Attributes) (bool, string, error) {
	return true, "", nil
}

type nobody struct{}

func (nobody) Authenticate(*http.Request) (*auth.User, error) { return nil, nil }

// startServer is an API server over a real store with flow control wired
// in as the server wires it, and the controller's loop running.
func startServer(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	base := apitest.Start(t, apitest.Options{})
	apf := flowcontrol.New(flowcontrol.Config{})
	api, err := apiserver.New(apiserver.Config{Registry: base.Registry, Storage: base.Storage, Authenticator: nobody{}, Authorizer: allowAll{}, FlowControl: apf})
	if err != nil {
		t.Fatal(err)
	}
	system := &auth.User{Name: "system:apiserver", Groups: []string{auth.GroupMasters, auth.GroupAuthenticated}}
	cs := kubernetes.NewForConfigOrDie(clientConfig(api, system))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := apf.Run(ctx, cs); err != nil && ctx.Err() == nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return apf.Ready(), nil
	}); err != nil {
		t.Fatalf("bootstrap configuration never made: %v", err)
	}
	return api, cs
}

func clientConfig(api *apiserver.Server, u *auth.User) *rest.Config {
	return &rest.Config{Host: "http://skiff.internal", Transport: api.Transport(u), RateLimiter: clientflowcontrol.NewFakeAlwaysRateLimiter()}
}

func get(t *testing.T, api *apiserver.Server, u *auth.User, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://skiff.internal"+path, nil)
	resp, err := api.Transport(u).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// waitNotDangling waits for the controller to have seen a FlowSchema and
// its level, as upstream's e2e test does (Dangling=False).
func waitNotDangling(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return c.Status == flowcontrolv1.ConditionFalse, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("FlowSchema %s never reported its level found: %v", name, err)
	}
}

func TestServer_NewFlowSchema_ClassifiesLiveWithUIDHeaders(t *testing.T) {
	api, cs := startServer(t)
	ctx := context.Background()
	pl, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-testing-prioritylevel"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To(int32(1)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-testing-flowschema"},
		Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 1000, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl.Name},
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "noxu"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitNotDangling(t, cs, fs.Name)

	noxu := &auth.User{Name: "noxu", Groups: []string{auth.GroupAuthenticated}}
	resp := get(t, api, noxu, "/version")
	if got := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID); got != string(fs.UID) {
		t.Errorf("FlowSchema UID header = %q, want %q", got, fs.UID)
	}
	if got := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID); got != string(pl.UID) {
		t.Errorf("priority level UID header = %q, want %q", got, pl.UID)
	}
	foo := &auth.User{Name: "foo", Groups: []string{auth.GroupAuthenticated}}
	global, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "global-default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, api, foo, "/version").Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID); got != string(global.UID) {
		t.Errorf("other user's FlowSchema UID = %q, want global-default's %q", got, global.UID)
	}

	// Deleting the level leaves the schema dangling, and noxu falls through
	// to global-default.
	if err := cs.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, pl.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return get(t, api, noxu, "/version").Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(global.UID), nil
	})
	if err != nil {
		t.Errorf("noxu still classified to the schema of a deleted level: %v", err)
	}
}

func TestServer_MandatorySpec_CannotBeChanged(t *testing.T) {
	_, cs := startServer(t)
	ctx := context.Background()
	fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs.Spec.MatchingPrecedence = 9000
	if _, err := cs.FlowcontrolV1().FlowSchemas().Update(ctx, fs, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing catch-all's spec: err = %v, want 422", err)
	}
}
