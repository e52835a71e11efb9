package schema

import (
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Pruning drops what the schema does not declare, as upstream's pruning
// package does: below x-kubernetes-preserve-unknown-fields nothing is
// dropped until a node declares properties or additionalProperties again,
// and apiVersion, kind and metadata of embedded resources stay.

var implicitMetaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// pruner records the paths it drops in the form strict field validation
// reports them: "spec.foo", "spec.list[0].bar".
type pruner struct {
	path    []string
	unknown []string
}

func (p *pruner) push(key string) int {
	n := len(p.path)
	if n > 0 {
		p.path = append(p.path, ".")
	}
	p.path = append(p.path, key)
	return n
}

func (p *pruner) pushIndex(i int) int {
	n := len(p.path)
	p.path = append(p.path, "[", strconv.Itoa(i), "]")
	return n
}

func (p *pruner) pop(n int) { p.path = p.path[:n] }

func (p *pruner) record(key string) {
	n := p.push(key)
	p.unknown = append(p.unknown, strings.Join(p.path, ""))
	p.pop(n)
}

// pruneOnly is upstream's pruning.Prune: it returns the dropped paths,
// sorted.
func pruneOnly(obj any, s *apiextensionsv1.JSONSchemaProps, isResourceRoot bool) []string {
	if isResourceRoot {
		s = withEmbedded(s)
	}
	p := &pruner{}
	p.prune(obj, s)
	sort.Strings(p.unknown)
	return p.unknown
}

func (p *pruner) prune(x any, s *apiextensionsv1.JSONSchemaProps) {
	if preservesUnknown(s) {
		p.skipPrune(x, s)
		return
	}
	switch x := x.(type) {
	case map[string]any:
		if s == nil {
			for k := range x {
				p.record(k)
				delete(x, k)
			}
			return
		}
		hasAP, ap := additional(s)
		for k, v := range x {
			if s.XEmbeddedResource && implicitMetaFields[k] {
				continue
			}
			if prop, ok := s.Properties[k]; ok {
				n := p.push(k)
				p.prune(v, &prop)
				p.pop(n)
			} else if hasAP {
				n := p.push(k)
				p.prune(v, ap)
				p.pop(n)
			} else {
				// Below the root a stray "metadata" is an unknown field too.
				if !implicitMetaFields[k] || len(p.path) > 0 {
					p.record(k)
				}
				delete(x, k)
			}
		}
	case []any:
		items := itemsOf(s)
		for i, v := range x {
			n := p.pushIndex(i)
			p.prune(v, items)
			p.pop(n)
		}
	}
}

// skipPrune walks a preserve-unknown-fields node, pruning only below
// declared properties and additionalProperties.
func (p *pruner) skipPrune(x any, s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		hasAP, ap := additional(s)
		for k, v := range x {
			if s.XEmbeddedResource && implicitMetaFields[k] {
				continue
			}
			if prop, ok := s.Properties[k]; ok {
				n := p.push(k)
				p.prune(v, &prop)
				p.pop(n)
			} else if hasAP {
				n := p.push(k)
				p.prune(v, ap)
				p.pop(n)
			}
		}
	case []any:
		items := itemsOf(s)
		for i, v := range x {
			n := p.pushIndex(i)
			p.skipPrune(v, items)
			p.pop(n)
		}
	}
}

// pruneNonNullableNullsWithoutDefaults drops null values of non-nullable
// fields that have no default (those with one are defaulted later), as
// decoding into a Go struct would drop them.
func pruneNonNullableNullsWithoutDefaults(x any, s *apiextensionsv1.JSONSchemaProps) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			fs := fieldSchema(k, s)
			if v == nil && fs != nil && !fs.Nullable {
				if _, hasDefault := defaultOf(fs); !hasDefault {
					delete(x, k)
				}
				continue
			}
			pruneNonNullableNullsWithoutDefaults(v, fs)
		}
	case []any:
		items := itemsOf(s)
		for _, v := range x {
			pruneNonNullableNullsWithoutDefaults(v, items)
		}
	}
}

func fieldSchema(k string, s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s == nil {
		return nil
	}
	if p, ok := s.Properties[k]; ok {
		return &p
	}
	_, ap := additional(s)
	return ap
}
