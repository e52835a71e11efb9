package openapi

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// modelNamer is implemented by the generated zz_generated.model_name.go of
// k8s.io/api and k8s.io/apimachinery types; asking the type keeps us in step
// with upstream if a name ever stops following the package path.
type modelNamer interface {
	OpenAPIModelName() string
}

// definitionName is the upstream definition name of a named Go type, e.g.
// k8s.io/api/core/v1.Pod becomes io.k8s.api.core.v1.Pod.
func definitionName(t reflect.Type) string {
	if n, ok := reflect.New(t).Interface().(modelNamer); ok {
		if name := n.OpenAPIModelName(); name != "" {
			return name
		}
	}
	pkg := t.PkgPath()
	if i := strings.LastIndex(pkg, "/vendor/"); i >= 0 {
		pkg = pkg[i+len("/vendor/"):]
	}
	parts := strings.Split(pkg, "/")
	if strings.Contains(parts[0], ".") {
		parts[0] = reverseDots(parts[0])
	}
	return strings.Join(parts, ".") + "." + t.Name()
}

func reverseDots(s string) string {
	parts := strings.Split(s, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".")
}

// gvPath is the key of a group-version in the v3 index and the prefix of its
// REST paths without the leading slash: "api/v1" or "apis/apps/v1".
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// groupWords splits an API group into the words upstream uses in operation
// ids and tags: "rbac.authorization.k8s.io" gives [rbac authorization] and
// the core group gives [core].
func groupWords(group string) []string {
	if group == "" {
		return []string{"core"}
	}
	group = strings.TrimSuffix(group, ".k8s.io")
	return strings.Split(group, ".")
}

// opGroupVersion is the group-version part of an operation id, e.g.
// "RbacAuthorizationV1" or "CoreV1".
func opGroupVersion(gv schema.GroupVersion) string {
	var b strings.Builder
	for _, w := range groupWords(gv.Group) {
		b.WriteString(upperFirst(w))
	}
	b.WriteString(upperFirst(gv.Version))
	return b.String()
}

// tagName is the tag upstream gives every operation of a group-version, e.g.
// "rbacAuthorization_v1" or "core_v1".
func tagName(gv schema.GroupVersion) string {
	words := groupWords(gv.Group)
	var b strings.Builder
	b.WriteString(words[0])
	for _, w := range words[1:] {
		b.WriteString(upperFirst(w))
	}
	return b.String() + "_" + gv.Version
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
