package rbac

import (
	"context"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/auth"
)

// fakeLister serves policy from memory; the err fields make one method fail.
type fakeLister struct {
	crbs         []*rbacv1.ClusterRoleBinding
	rbs          []*rbacv1.RoleBinding
	clusterRoles []*rbacv1.ClusterRole
	roles        []*rbacv1.Role

	crbErr, rbErr, getErr error
}

func (f *fakeLister) ListClusterRoleBindings(context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	if f.crbErr != nil {
		return nil, f.crbErr
	}
	return f.crbs, nil
}

func (f *fakeLister) ListRoleBindings(_ context.Context, ns string) ([]*rbacv1.RoleBinding, error) {
	if f.rbErr != nil {
		return nil, f.rbErr
	}
	var out []*rbacv1.RoleBinding
	for _, b := range f.rbs {
		if b.Namespace == ns {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeLister) GetClusterRole(_ context.Context, name string) (*rbacv1.ClusterRole, error) {
	if f.getErr != nil {
		return nil, f.getErr
	}
	for _, r := range f.clusterRoles {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, nil
}

func (f *fakeLister) GetRole(_ context.Context, ns, name string) (*rbacv1.Role, error) {
	if f.getErr != nil {
		return nil, f.getErr
	}
	for _, r := range f.roles {
		if r.Namespace == ns && r.Name == name {
			return r, nil
		}
	}
	return nil, nil
}

func newClusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func newRole(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func newCRB(name, clusterRole string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   subjects,
	}
}

func newRB(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   subjects,
	}
}

func saSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

func user(name string, groups ...string) *auth.User {
	return &auth.User{Name: name, Groups: groups}
}

// res describes a resource request; resource may be "res/sub".
func res(u *auth.User, verb, group, resource, ns, name string) auth.Attributes {
	r, sub, _ := strings.Cut(resource, "/")
	return auth.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group,
		Resource: r, Subresource: sub, Namespace: ns, Name: name}
}

func nonRes(u *auth.User, verb, path string) auth.Attributes {
	return auth.Attributes{User: u, Verb: verb, Path: path}
}
