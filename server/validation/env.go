package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Field paths the downward API can expose through environment variables.
var envFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid",
	"spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

// Field paths the downward API can expose as files in a volume.
var volumeFieldPaths = []string{
	"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
}

var containerResourceFields = []string{
	"limits.cpu", "limits.ephemeral-storage", "limits.memory",
	"requests.cpu", "requests.ephemeral-storage", "requests.memory",
}

func validateEnv(vars []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		idxPath := fldPath.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		} else {
			errs = append(errs, messages(idxPath.Child("name"), ev.Name, utilvalidation.IsRelaxedEnvVarName(ev.Name))...)
		}
		errs = append(errs, validateEnvVarSource(ev, idxPath.Child("valueFrom"))...)
	}
	return errs
}

func validateEnvVarSource(ev corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	from := ev.ValueFrom
	if from == nil {
		return nil
	}
	var errs field.ErrorList
	sources := 0
	if from.FieldRef != nil {
		sources++
		errs = append(errs, validateFieldSelector(from.FieldRef, envFieldPaths, fldPath.Child("fieldRef"))...)
	}
	if from.ResourceFieldRef != nil {
		sources++
		errs = append(errs, validateResourceFieldSelector(from.ResourceFieldRef, false, fldPath.Child("resourceFieldRef"))...)
	}
	if from.ConfigMapKeyRef != nil {
		sources++
		errs = append(errs, validateKeySelector(from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if from.SecretKeyRef != nil {
		sources++
		errs = append(errs, validateKeySelector(from.SecretKeyRef.Name, from.SecretKeyRef.Key, fldPath.Child("secretKeyRef"))...)
	}
	switch {
	case sources == 0:
		errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case sources > 1:
		errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return errs
}

func validateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	errs := messages(fldPath.Child("name"), name, apivalidation.NameIsDNSSubdomain(name, false))
	if key == "" {
		return append(errs, field.Required(fldPath.Child("key"), ""))
	}
	return append(errs, messages(fldPath.Child("key"), key, utilvalidation.IsConfigMapKey(key))...)
}

// validateFieldSelector checks a downward API field reference against the
// paths allowed where it is used; labels and annotations may be subscripted.
func validateFieldSelector(fs *corev1.ObjectFieldSelector, allowed []string, fldPath *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	if fs.APIVersion != "v1" {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), fs.FieldPath,
			fmt.Sprintf("error converting fieldPath: unsupported pod version: %s", fs.APIVersion))}
	}
	if base, key, ok := splitSubscript(fs.FieldPath); ok {
		switch base {
		case "metadata.annotations":
			return qualifiedName(strings.ToLower(key), fldPath)
		case "metadata.labels":
			return qualifiedName(key, fldPath)
		}
		return field.ErrorList{field.Invalid(fldPath, base, "does not support subscript")}
	}
	for _, p := range allowed {
		if p == fs.FieldPath {
			return nil
		}
	}
	return notSupported(fldPath.Child("fieldPath"), fs.FieldPath, allowed...)
}

// splitSubscript splits "metadata.labels['key']" into its path and key.
func splitSubscript(p string) (base, key string, ok bool) {
	open := strings.Index(p, "['")
	if open <= 0 || !strings.HasSuffix(p, "']") || len(p) < open+4 {
		return "", "", false
	}
	return p[:open], p[open+2 : len(p)-2], true
}

// validateResourceFieldSelector checks a downward API resource reference;
// volumes must name the container, env vars default to their own container.
func validateResourceFieldSelector(fs *corev1.ResourceFieldSelector, needContainer bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if needContainer && fs.ContainerName == "" {
		errs = append(errs, field.Required(fldPath.Child("containerName"), ""))
	}
	switch {
	case fs.Resource == "":
		return append(errs, field.Required(fldPath.Child("resource"), ""))
	case strings.HasPrefix(fs.Resource, "limits.hugepages-") || strings.HasPrefix(fs.Resource, "requests.hugepages-"):
	case !sets.New(containerResourceFields...).Has(fs.Resource):
		return append(errs, notSupported(fldPath.Child("resource"), fs.Resource, containerResourceFields...)...)
	}
	return append(errs, validateDivisor(fs.Resource, fs.Divisor, fldPath.Child("divisor"))...)
}

// validateDivisor allows only the unit divisors the kubelet knows how to
// apply; anything else would silently produce a wrong number.
func validateDivisor(rsrc string, divisor resource.Quantity, fldPath *field.Path) field.ErrorList {
	if divisor.IsZero() {
		return nil
	}
	if strings.HasSuffix(rsrc, ".cpu") {
		if divisor.Cmp(resource.MustParse("1m")) == 0 || divisor.Cmp(resource.MustParse("1")) == 0 {
			return nil
		}
		return field.ErrorList{field.Invalid(fldPath, divisor, "only divisor's values 1m and 1 are supported with the cpu resource")}
	}
	for _, unit := range []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"} {
		if divisor.Cmp(resource.MustParse(unit)) == 0 {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(fldPath, divisor, "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource")}
}

func validateEnvFrom(vars []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		idxPath := fldPath.Index(i)
		if ev.Prefix != "" {
			errs = append(errs, messages(idxPath.Child("prefix"), ev.Prefix, utilvalidation.IsRelaxedEnvVarName(ev.Prefix))...)
		}
		sources := 0
		if ev.ConfigMapRef != nil {
			sources++
			errs = append(errs, validateEnvSourceName(ev.ConfigMapRef.Name, idxPath.Child("configMapRef", "name"))...)
		}
		if ev.SecretRef != nil {
			sources++
			errs = append(errs, validateEnvSourceName(ev.SecretRef.Name, idxPath.Child("secretRef", "name"))...)
		}
		if sources == 0 {
			errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if sources > 1 {
			errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateEnvSourceName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return messages(fldPath, name, apivalidation.NameIsDNSSubdomain(name, true))
}

func validateResourceRequirements(req *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	var hasCPUOrMemory, hasHugePages bool
	note := func(name corev1.ResourceName) {
		hasCPUOrMemory = hasCPUOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
		hasHugePages = hasHugePages || isHugePages(name)
	}
	for name, q := range req.Limits {
		keyPath := limPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, keyPath)...)
		errs = append(errs, validateQuantity(name, q, keyPath)...)
		note(name)
	}
	for name, q := range req.Requests {
		keyPath := reqPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, keyPath)...)
		errs = append(errs, validateQuantity(name, q, keyPath)...)
		note(name)
		limit, hasLimit := req.Limits[name]
		switch {
		case hasLimit && q.Cmp(limit) != 0 && !overcommitAllowed(name):
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case hasLimit && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		case !hasLimit && !overcommitAllowed(name):
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
	}
	if hasHugePages && !hasCPUOrMemory {
		errs = append(errs, field.Forbidden(fldPath, "HugePages require cpu or memory"))
	}
	for i, c := range req.Claims {
		if c.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("claims").Index(i).Child("name"), ""))
		}
	}
	return errs
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// isNativeResource: resources without a domain or in kubernetes.io belong to
// Kubernetes itself; everything else is an extended resource.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), "kubernetes.io/")
}

// overcommitAllowed: extended resources and huge pages are whole devices or
// pinned memory, so a request must equal its limit.
func overcommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !isHugePages(name)
}

func validateContainerResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	errs := qualifiedName(string(name), fldPath)
	if len(errs) != 0 {
		return errs
	}
	switch {
	case !strings.Contains(string(name), "/"):
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage && !isHugePages(name) {
			errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	case !isNativeResource(name) && !isExtendedResource(name):
		errs = append(errs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

func isExtendedResource(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(qualifiedName(corev1.DefaultResourceRequestsPrefix+string(name), field.NewPath(""))) == 0
}

// validateQuantity is upstream's ValidateResourceQuantityValue: never
// negative, and whole numbers for resources that are counted.
func validateQuantity(name corev1.ResourceName, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	errs := quantityNonNegative(q, fldPath)
	if isIntegerResource(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(fldPath, q, "must be an integer"))
	}
	return errs
}

func isIntegerResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
		corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
		corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers:
		return true
	}
	return strings.HasPrefix(string(name), "count/") || isExtendedResource(name)
}
