package conversion

import (
	"fmt"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// restoreObjectMeta puts the original's metadata back into converted,
// keeping only the labels and annotations the webhook returned (checked as
// the API checks them), as upstream's restoreObjectMeta: a webhook must
// not change an object's identity, versions, owners or finalizers.
func restoreObjectMeta(original, converted *unstructured.Unstructured) error {
	obj, found := converted.Object["metadata"]
	if !found {
		return fmt.Errorf("missing metadata in converted object")
	}
	response, ok := obj.(map[string]any)
	if !ok {
		return fmt.Errorf("invalid metadata of type %T in converted object", obj)
	}
	restored := map[string]any{}
	if m, ok := original.Object["metadata"]; ok {
		restored, ok = runtime.DeepCopyJSONValue(m).(map[string]any)
		if !ok {
			return fmt.Errorf("invalid metadata of type %T in input object", m)
		}
	}
	converted.Object["metadata"] = restored
	for _, fld := range []string{"labels", "annotations"} {
		v, found := response[fld]
		if !found || v == nil {
			delete(restored, fld)
			continue
		}
		got, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("invalid metadata.%s of type %T in converted object", fld, v)
		}
		had, ok := restored[fld].(map[string]any)
		if !ok && restored[fld] != nil {
			return fmt.Errorf("invalid metadata.%s of type %T in original object", fld, restored[fld])
		}
		changed := len(had) != len(got)
		strs := make(map[string]string, len(got))
		for k, val := range got {
			s, ok := val.(string)
			if !ok {
				return fmt.Errorf("metadata.%s[%s] must be a string, but is %T in converted object", fld, k, val)
			}
			if had[k] != any(s) {
				changed = true
			}
			strs[k] = s
		}
		if changed {
			var errs field.ErrorList
			if fld == "labels" {
				errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", "labels"))
			} else {
				errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotations"))
			}
			if len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		restored[fld] = got
	}
	return nil
}
