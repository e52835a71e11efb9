package webhook

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"skiff/server/apiserver"
	"skiff/server/auth"
)

// configMapWriters lets alice write configmaps in default, and keeps what
// it was asked.
type configMapWriters struct{ asked []auth.Attributes }

func (c *configMapWriters) Authorize(_ context.Context, a auth.Attributes) (bool, string, error) {
	c.asked = append(c.asked, a)
	return a.User != nil && a.User.Name == "alice" && a.Resource == "configmaps" && a.Namespace == "default", "", nil
}

func TestShouldCall_AuthorizerCondition_DecidedForTheRequester(t *testing.T) {
	reg := testRegistry(t)
	configmaps := resource(t, reg, "", "v1", "configmaps")
	// The webhook reviews only writers who may not delete the configmap.
	hook := admissionregistrationv1.ValidatingWebhook{Name: "hook.example.com", Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "untrusted", Expression: "!authorizer.requestResource.check('delete').allowed()"}}}
	cases := []struct {
		user string
		want bool
	}{{"alice", false}, {"bob", true}}
	for _, tc := range cases {
		t.Run(tc.user, func(t *testing.T) {
			authz := &configMapWriters{}
			cfg := newConfig(&fakeSource{}, reg, nil)
			cfg.Authorizer = authz
			d := newDispatcher(cfg)
			c := &corev1.ConfigMap{}
			c.Name, c.Namespace = "c", "default"
			user := &auth.User{Name: tc.user}
			_, got, err := d.shouldCall(context.Background(), fromValidating(validatingConfig("cfg", hook), 0),
				newRequest(apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: configmaps, Object: c, User: user}))
			if err != nil || got != tc.want {
				t.Fatalf("shouldCall = %v, %v; want %v", got, err, tc.want)
			}
			want := auth.Attributes{User: user, Verb: "delete", ResourceRequest: true, APIVersion: "*", Resource: "configmaps", Namespace: "default", Name: "c"}
			if len(authz.asked) != 1 || authz.asked[0] != want {
				t.Errorf("asked %+v, want [%+v]", authz.asked, want)
			}
		})
	}
}

// Without an authorizer the condition cannot be evaluated: Fail refuses
// the request (403), as for any failing condition.
func TestShouldCall_AuthorizerConditionWithoutAuthorizer_Forbidden(t *testing.T) {
	reg := testRegistry(t)
	d := newDispatcher(newConfig(&fakeSource{}, reg, nil))
	hook := admissionregistrationv1.ValidatingWebhook{Name: "hook.example.com", Rules: []admissionregistrationv1.RuleWithOperations{rule(allOps, "", "v1", "configmaps")},
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "authorizer.requestResource.check('delete').allowed()"}}}
	c := &corev1.ConfigMap{}
	c.Name, c.Namespace = "c", "default"
	_, _, err := d.shouldCall(context.Background(), fromValidating(validatingConfig("cfg", hook), 0),
		newRequest(apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Resource: resource(t, reg, "", "v1", "configmaps"), Object: c, User: &auth.User{Name: "alice"}}))
	if code := statusCode(err); code != 403 {
		t.Fatalf("err = %v (code %d), want a 403", err, code)
	}
}
