package printers

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Roles and ClusterRoles have no printer upstream either: they get the
// default Name / Created At table.

func roleBindingPrinter() Printer {
	return Printer{
		Columns: bindingColumns(rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"], "roleBinding"),
		Cells:   roleBindingCells,
	}
}

func clusterRoleBindingPrinter() Printer {
	return Printer{
		Columns: bindingColumns(rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"], "clusterRoleBinding"),
		Cells:   clusterRoleBindingCells,
	}
}

func bindingColumns(roleRefDoc, kind string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		column("Role", "string", roleRefDoc),
		ageColumn(),
		wideColumn("Users", "string", "Users in the "+kind),
		wideColumn("Groups", "string", "Groups in the "+kind),
		wideColumn("ServiceAccounts", "string", "ServiceAccounts in the "+kind),
	}
}

func roleBindingCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	rb, err := typed[rbacv1.RoleBinding](obj)
	if err != nil {
		return nil, err
	}
	return bindingCells(rb.ObjectMeta, rb.RoleRef, rb.Subjects, now), nil
}

func clusterRoleBindingCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	crb, err := typed[rbacv1.ClusterRoleBinding](obj)
	if err != nil {
		return nil, err
	}
	return bindingCells(crb.ObjectMeta, crb.RoleRef, crb.Subjects, now), nil
}

// bindingCells lists subjects by kind; service accounts as namespace/name.
// Subjects of other kinds are not shown, as upstream.
func bindingCells(m metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []interface{} {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, fmt.Sprintf("%s/%s", s.Namespace, s.Name))
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return []interface{}{
		m.Name,
		fmt.Sprintf("%s/%s", ref.Kind, ref.Name),
		translateTimestampSince(m.CreationTimestamp, now),
		strings.Join(users, ", "),
		strings.Join(groups, ", "),
		strings.Join(sas, ", "),
	}
}
