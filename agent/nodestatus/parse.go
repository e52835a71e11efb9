package nodestatus

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrBadTaint is wrapped by ParseTaint for a malformed --node-taint.
var ErrBadTaint = errors.New("bad taint")

// ErrBadLabel is wrapped by ParseLabel for a malformed --node-label.
var ErrBadLabel = errors.New("bad label")

// ParseTaint parses a --node-taint value as the kubelet's
// --register-with-taints does: "key=value:Effect" or "key:Effect", where
// Effect is NoSchedule, PreferNoSchedule or NoExecute.
func ParseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("%w %q: want key=value:Effect or key:Effect", ErrBadTaint, s)
	}
	if strings.Contains(effect, ":") {
		return corev1.Taint{}, fmt.Errorf("%w %q: more than one ':'", ErrBadTaint, s)
	}
	taint := corev1.Taint{Effect: corev1.TaintEffect(effect)}
	switch taint.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("%w %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", ErrBadTaint, s, effect)
	}
	key, value, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("%w %q: key: %s", ErrBadTaint, s, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("%w %q: value: %s", ErrBadTaint, s, strings.Join(errs, "; "))
	}
	taint.Key, taint.Value = key, value
	return taint, nil
}

// ParseTaints parses every --node-taint value; duplicates of the same key
// and effect are refused, as the API server would refuse them.
func ParseTaints(values []string) ([]corev1.Taint, error) {
	seen := map[string]bool{}
	var out []corev1.Taint
	for _, v := range values {
		t, err := ParseTaint(v)
		if err != nil {
			return nil, err
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			return nil, fmt.Errorf("%w %q: key %q with effect %s given twice", ErrBadTaint, v, t.Key, t.Effect)
		}
		seen[id] = true
		out = append(out, t)
	}
	return out, nil
}

// ParseLabel parses a --node-label value, "key=value" (the value may be
// empty).
func ParseLabel(s string) (key, value string, err error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("%w %q: want key=value", ErrBadLabel, s)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return "", "", fmt.Errorf("%w %q: key: %s", ErrBadLabel, s, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return "", "", fmt.Errorf("%w %q: value: %s", ErrBadLabel, s, strings.Join(errs, "; "))
	}
	return key, value, nil
}

// ParseLabels parses every --node-label value into a map; a later value for
// the same key wins.
func ParseLabels(values []string) (map[string]string, error) {
	out := make(map[string]string, len(values))
	for _, v := range values {
		k, val, err := ParseLabel(v)
		if err != nil {
			return nil, err
		}
		out[k] = val
	}
	return out, nil
}
