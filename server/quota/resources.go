package quota

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The arithmetic on resource lists that quota needs, with upstream's
// semantics (k8s.io/apiserver/pkg/quota/v1): names missing on one side
// count as zero, results are fresh copies.

// Equals reports whether a and b hold the same names with equal amounts.
func Equals(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		o, ok := b[k]
		if !ok || v.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// LessThanOrEqual reports whether every amount of a is at most b's for the
// names both have, and which names exceed.
func LessThanOrEqual(a, b corev1.ResourceList) (bool, []corev1.ResourceName) {
	var over []corev1.ResourceName
	for k, limit := range b {
		if v, ok := a[k]; ok && v.Cmp(limit) > 0 {
			over = append(over, k)
		}
	}
	return len(over) == 0, over
}

// Add returns a + b.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range a {
		q := v.DeepCopy()
		if o, ok := b[k]; ok {
			q.Add(o)
		}
		out[k] = q
	}
	for k, v := range b {
		if _, ok := out[k]; !ok {
			out[k] = v.DeepCopy()
		}
	}
	return out
}

// SubtractWithNonNegativeResult returns a - b with every amount at least 0.
func SubtractWithNonNegativeResult(a, b corev1.ResourceList) corev1.ResourceList {
	zero := resource.MustParse("0")
	out := corev1.ResourceList{}
	for k, v := range a {
		q := v.DeepCopy()
		if o, ok := b[k]; ok {
			q.Sub(o)
		}
		if q.Cmp(zero) > 0 {
			out[k] = q
		} else {
			out[k] = zero
		}
	}
	for k := range b {
		if _, ok := out[k]; !ok {
			out[k] = zero
		}
	}
	return out
}

// Mask returns the part of list named in names.
func Mask(list corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range list {
		if slices.Contains(names, k) {
			out[k] = v.DeepCopy()
		}
	}
	return out
}

// Names returns the names in list, sorted.
func Names(list corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(list))
	for k := range list {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Intersection returns the names in both a and b, deduplicated and sorted.
func Intersection(a, b []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range a {
		if slices.Contains(b, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// RemoveZeros returns list without its zero amounts.
func RemoveZeros(list corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range list {
		if !v.IsZero() {
			out[k] = v
		}
	}
	return out
}

// Negative returns the names whose amounts are below zero.
func Negative(list corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for k, v := range list {
		if v.Sign() < 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// PrettyPrint formats a list as upstream's quota errors do: name=amount
// pairs sorted by name, joined by commas.
func PrettyPrint(list corev1.ResourceList) string {
	keys := make([]string, 0, len(list))
	for k := range list {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := list[corev1.ResourceName(k)]
		parts = append(parts, k+"="+v.String())
	}
	return strings.Join(parts, ",")
}

// PrettyPrintNames joins names sorted, with commas.
func PrettyPrintNames(names []corev1.ResourceName) string {
	s := make([]string, 0, len(names))
	for _, n := range names {
		s = append(s, string(n))
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func addInto(list, more corev1.ResourceList) {
	for k, v := range more {
		if cur, ok := list[k]; ok {
			cur.Add(v)
			list[k] = cur
		} else {
			list[k] = v.DeepCopy()
		}
	}
}

func maxInto(list, other corev1.ResourceList) {
	for k, v := range other {
		if cur, ok := list[k]; !ok || v.Cmp(cur) > 0 {
			list[k] = v.DeepCopy()
		}
	}
}
