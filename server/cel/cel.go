// Package cel compiles and evaluates the Common Expression Language as the
// Kubernetes API does: the x-kubernetes-validations rules of a CRD's schema
// (self, oldSelf, transition rules, messageExpression, upstream's cost
// limits) and, later, admission policies. The Kubernetes CEL libraries
// (lists, regex, urls, quantity, ip, cidr, format, semver) are written here.
//
// Files: env.go (the base environment other users extend), library_*.go
// (the Kubernetes libraries), types.go (schema -> CEL type), values.go and
// values_map.go (unstructured -> CEL values), cost.go (limits and cost
// estimates), compile.go (CompileSchema), validate.go (Validate),
// correlate.go (old values for transition rules and ratcheting).
package cel
