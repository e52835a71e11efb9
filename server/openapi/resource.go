package openapi

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one REST resource the API server serves.
type Resource struct {
	GVK          schema.GroupVersionKind // e.g. apps/v1 Deployment
	ListKind     string                  // DeploymentList
	Plural       string                  // deployments
	Namespaced   bool
	Object       runtime.Object // zero value of the Go type, e.g. &appsv1.Deployment{}
	List         runtime.Object // &appsv1.DeploymentList{}
	Subresources []string       // "status", "scale", ...
	Verbs        []string       // get list watch create update patch delete deletecollection; empty means all

	// def and listDef name the definitions of a resource without Go types
	// (a custom resource); empty means the definitions of Object and List.
	def, listDef string
}

func (r Resource) definition(defOf func(runtime.Object) string) string {
	if r.def != "" {
		return r.def
	}
	return defOf(r.Object)
}

func (r Resource) listDefinition(defOf func(runtime.Object) string) string {
	if r.listDef != "" {
		return r.listDef
	}
	return defOf(r.List)
}

// allVerbs is what a resource with no Verbs gets.
func allVerbs() []string {
	return []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
}

func (r Resource) has(verb string) bool {
	if len(r.Verbs) == 0 {
		return slices.Contains(allVerbs(), verb)
	}
	return slices.Contains(r.Verbs, verb)
}

func (r Resource) validate() error {
	var errs []error
	if r.GVK.Version == "" || r.GVK.Kind == "" {
		errs = append(errs, errors.New("GVK needs a version and a kind"))
	}
	if r.Plural == "" {
		errs = append(errs, errors.New("Plural is empty"))
	}
	if r.Object == nil {
		errs = append(errs, errors.New("Object is nil"))
	}
	if r.List != nil && r.ListKind == "" {
		errs = append(errs, errors.New("List is set but ListKind is empty"))
	}
	if r.List == nil && (r.has("list") || r.has("deletecollection")) {
		errs = append(errs, errors.New("List is nil but the resource can be listed"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("resource %s %s: %w", r.GVK.GroupVersion(), r.Plural, err)
	}
	return nil
}
