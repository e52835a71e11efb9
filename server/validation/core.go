package validation

import (
	"encoding/json"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxSecretSize bounds secrets and config maps; they are stored whole in one
// key of the state store and sent whole to every kubelet that mounts them.
const maxSecretSize = 1 * 1024 * 1024

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	errs := validateMeta(&ns.ObjectMeta, false, apivalidation.ValidateNamespaceName)
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), specPath.Child("finalizers"))...)
	}
	return errs
}

// validateFinalizerName: a finalizer without a domain must be one of the
// built-in ones, so that two controllers never claim the same name.
func validateFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, fldPath)
	if !strings.Contains(name, "/") && name != string(corev1.FinalizerKubernetes) {
		errs = append(errs, field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified"))
	}
	return errs
}

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := validateMeta(&cm.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	total := 0
	for key, value := range cm.Data {
		p := field.NewPath("data").Key(key)
		errs = append(errs, messages(p, key, utilvalidation.IsConfigMapKey(key))...)
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(p, key, "duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		p := field.NewPath("binaryData").Key(key)
		errs = append(errs, messages(p, key, utilvalidation.IsConfigMapKey(key))...)
		if _, dup := cm.Data[key]; dup {
			errs = append(errs, field.Invalid(p, key, "duplicate of key present in data"))
		}
		total += len(value)
	}
	if total > maxSecretSize {
		// The empty path says the error concerns the whole object.
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxSecretSize))
	}
	return errs
}

func validateConfigMapUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	errs := validateMetaUpdate(&cm.ObjectMeta, &old.ObjectMeta)
	if deref(old.Immutable, false) {
		errs = append(errs, validateImmutableData(cm.Immutable, []any{cm.Data, cm.BinaryData}, []any{old.Data, old.BinaryData}, []string{"data", "binaryData"})...)
	}
	return append(errs, validateConfigMap(cm)...)
}

// validateImmutableData enforces immutable: true; kubelets stop watching such
// objects, so a change would never reach running pods.
func validateImmutableData(flag *bool, fields, oldFields []any, names []string) field.ErrorList {
	const msg = "field is immutable when `immutable` is set"
	var errs field.ErrorList
	if !deref(flag, false) {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), msg))
	}
	for i := range fields {
		if !reflect.DeepEqual(fields[i], oldFields[i]) {
			errs = append(errs, field.Forbidden(field.NewPath(names[i]), msg))
		}
	}
	return errs
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	dataPath := field.NewPath("data")
	total := 0
	for key, value := range s.Data {
		errs = append(errs, messages(dataPath.Key(key), key, utilvalidation.IsConfigMapKey(key))...)
		total += len(value)
	}
	if total > maxSecretSize {
		errs = append(errs, field.TooLong(dataPath, "", maxSecretSize))
	}
	return append(errs, validateSecretType(s, dataPath)...)
}

// validateSecretType enforces the keys that consumers of the well-known
// secret types rely on.
func validateSecretType(s *corev1.Secret, dataPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	requireKey := func(key string) {
		if _, ok := s.Data[key]; !ok {
			errs = append(errs, field.Required(dataPath.Key(key), ""))
		}
	}
	requireJSON := func(key string) {
		raw, ok := s.Data[key]
		if !ok {
			errs = append(errs, field.Required(dataPath.Key(key), ""))
			return
		}
		if err := json.Unmarshal(raw, &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error()))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		// The token itself is filled in later by the token controller.
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(metaPath.Child("annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		requireJSON(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		requireJSON(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, hasUser := s.Data[corev1.BasicAuthUsernameKey]
		_, hasPassword := s.Data[corev1.BasicAuthPasswordKey]
		if !hasUser && !hasPassword {
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		requireKey(corev1.TLSCertKey)
		requireKey(corev1.TLSPrivateKeyKey)
	}
	return errs
}

func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, immutable(s.Type, old.Type, field.NewPath("type"))...)
	if deref(old.Immutable, false) {
		errs = append(errs, validateImmutableData(s.Immutable, []any{s.Data}, []any{old.Data}, []string{"data"})...)
	}
	return append(errs, validateSecret(s)...)
}

func validateServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	return validateMeta(&sa.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
}

// validateBinding checks a pod binding, whose metadata is the pod's and is
// therefore not validated again.
func validateBinding(b *corev1.Binding) field.ErrorList {
	var errs field.ErrorList
	targetPath := field.NewPath("target")
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(targetPath.Child("kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(targetPath.Child("name"), ""))
	}
	return errs
}

func validateNode(node *corev1.Node) field.ErrorList {
	errs := validateMeta(&node.ObjectMeta, false, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateTaints(node.Spec.Taints, specPath.Child("taints"))...)
	if node.Spec.PodCIDR != "" {
		errs = append(errs, legacyCIDR(node.Spec.PodCIDR, specPath.Child("podCIDR"))...)
		if len(node.Spec.PodCIDRs) > 0 && node.Spec.PodCIDRs[0] != node.Spec.PodCIDR {
			errs = append(errs, field.Invalid(specPath.Child("podCIDR"), node.Spec.PodCIDR, "must match the first element of podCIDRs"))
		}
	}
	cidrsPath := specPath.Child("podCIDRs")
	for i, c := range node.Spec.PodCIDRs {
		errs = append(errs, legacyCIDR(c, cidrsPath.Index(i))...)
	}
	if !dualStackPair(node.Spec.PodCIDRs) {
		errs = append(errs, field.Invalid(cidrsPath, node.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
	}
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"capacity", node.Status.Capacity}, {"allocatable", node.Status.Allocatable}} {
		for name, q := range list.rl {
			p := field.NewPath("status", list.name).Key(string(name))
			errs = append(errs, qualifiedName(string(name), p)...)
			errs = append(errs, quantityNonNegative(q, p)...)
		}
	}
	return errs
}

// dualStackPair accepts zero or one CIDR, or two of different IP families.
func dualStackPair(cidrs []string) bool {
	switch len(cidrs) {
	case 0, 1:
		return true
	case 2:
		return strings.Contains(cidrs[0], ":") != strings.Contains(cidrs[1], ":")
	}
	return false
}

// validateNodeUpdate: the pod CIDR and provider ID are assigned once by
// controllers; routes and cloud resources hang off them afterwards.
func validateNodeUpdate(node, old *corev1.Node) field.ErrorList {
	errs := validateMetaUpdate(&node.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateNode(node)...)
	const cidrMsg = "node updates may not change podCIDR except from \"\" to valid"
	if len(old.Spec.PodCIDRs) > 0 && !reflect.DeepEqual(old.Spec.PodCIDRs, node.Spec.PodCIDRs) {
		errs = append(errs, field.Forbidden(specPath.Child("podCIDRs"), cidrMsg))
	} else if old.Spec.PodCIDR != "" && old.Spec.PodCIDR != node.Spec.PodCIDR {
		errs = append(errs, field.Forbidden(specPath.Child("podCIDR"), cidrMsg))
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != node.Spec.ProviderID {
		errs = append(errs, field.Forbidden(specPath.Child("providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	if node.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(specPath.Child("externalID"), "may not be updated"))
	}
	return errs
}
