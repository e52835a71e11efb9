package node

import (
	"context"
	"testing"

	"skiff/server/auth"
)

func TestNodeAuthorizer_PodCertificates(t *testing.T) {
	n1 := &auth.User{Name: "system:node:n1", Groups: []string{auth.GroupNodes, auth.GroupAuthenticated}}
	res := func(verb, group, resource, sub, ns, name string) auth.Attributes {
		return auth.Attributes{User: n1, Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	tests := []struct {
		name  string
		attrs auth.Attributes
		want  Decision
	}{
		{"create a request (the body is checked at admission)", res("create", "certificates.k8s.io", "podcertificaterequests", "", "app", ""), Allow},
		{"poll a request", res("get", "certificates.k8s.io", "podcertificaterequests", "", "app", "web-1"), Allow},
		{"sign a request", res("update", "certificates.k8s.io", "podcertificaterequests", "status", "app", "web-1"), Deny},
		{"delete a request", res("delete", "certificates.k8s.io", "podcertificaterequests", "", "app", "web-1"), Deny},
		{"read its pod's service account", res("get", "", "serviceaccounts", "", "app", "web-sa"), Allow},
		{"read another node's pod's service account", res("get", "", "serviceaccounts", "", "app", "other-sa"), Deny},
		{"list service accounts", res("list", "", "serviceaccounts", "", "app", ""), Deny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New(&fakeGraph{pods: fixturePods()}, &rbacSays{})
			got, _, err := a.Decide(context.Background(), tc.attrs)
			if err != nil || got != tc.want {
				t.Fatalf("Decide = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
