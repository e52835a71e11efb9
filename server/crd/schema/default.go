package schema

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// applyDefaults is upstream's defaulting.Default: top down, a property's
// default is set when the property is absent or a null the schema does not
// allow; then each value is defaulted by its own schema. Items and
// additionalProperties only replace non-nullable nulls. Every default is a
// fresh decode of the schema's JSON, so objects never share it.
func applyDefaults(x any, s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, prop := range s.Properties {
			if prop.Default == nil {
				continue
			}
			d, ok := defaultOf(&prop)
			if !ok {
				continue
			}
			if v, found := x[k]; !found || (v == nil && !prop.Nullable) {
				x[k] = d
			}
		}
		_, ap := additional(s)
		for k, v := range x {
			if prop, ok := s.Properties[k]; ok {
				applyDefaults(v, &prop)
			} else if ap != nil {
				if v == nil && !ap.Nullable {
					x[k], _ = defaultOf(ap)
				}
				applyDefaults(x[k], ap)
			}
		}
	case []any:
		items := itemsOf(s)
		if items == nil {
			return
		}
		for i := range x {
			if x[i] == nil && !items.Nullable {
				x[i], _ = defaultOf(items)
			}
			applyDefaults(x[i], items)
		}
	}
}
