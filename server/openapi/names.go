package openapi

import (
	"reflect"
	"strings"
	"unicode"

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

// groupOf is the group as upstream's operation ids and tags spell it:
// without ".k8s.io", and "core" for the core group.
func groupOf(group string) string {
	if group == "" {
		return "core"
	}
	return strings.TrimSuffix(group, ".k8s.io")
}

// opGroupVersion is the group-version part of an operation id, e.g.
// "RbacAuthorizationV1", "CoreV1" or, for a custom group such as
// "stable-x.example.com", "StableXExampleCom".
func opGroupVersion(gv schema.GroupVersion) string {
	return toValidOperationID(groupOf(gv.Group), true) + toValidOperationID(gv.Version, true)
}

// tagName is the tag upstream gives every operation of a group-version, e.g.
// "rbacAuthorization_v1" or "core_v1".
func tagName(gv schema.GroupVersion) string {
	return toValidOperationID(groupOf(gv.Group), false) + "_" + toValidOperationID(gv.Version, false)
}

// toValidOperationID drops the characters an operation id cannot hold
// (dots, dashes, a leading digit) and capitalises the letter after each, as
// upstream's route builder does; custom groups and kinds need it.
func toValidOperationID(s string, capitalizeFirst bool) string {
	var b strings.Builder
	capitalize := capitalizeFirst
	for i, r := range s {
		if unicode.IsLetter(r) || r == '_' || (i != 0 && unicode.IsDigit(r)) {
			if capitalize {
				r = unicode.ToUpper(r)
				capitalize = false
			}
			b.WriteRune(r)
			continue
		}
		capitalize = true
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
