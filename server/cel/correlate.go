package cel

import (
	"fmt"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// mapList finds, for an element of a new x-kubernetes-list-type=map list,
// the old element with the same keys: that is how transition rules and
// ratcheting correlate list items.
type mapList struct {
	keys  []string
	keyed map[any]any
}

func makeMapList(s *apiextensionsv1.JSONSchemaProps, items []any) *mapList {
	if s.Type != "array" || s.XListType == nil || *s.XListType != "map" || len(s.XListMapKeys) == 0 || len(items) == 0 {
		return nil
	}
	ml := &mapList{keys: s.XListMapKeys, keyed: make(map[any]any, len(items))}
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if k, ok := ml.keyFor(m); ok {
			if _, exists := ml.keyed[k]; !exists {
				ml.keyed[k] = m
			}
		}
	}
	return ml
}

// keyFor is the element's key, if all its key fields are scalars.
func (ml *mapList) keyFor(obj map[string]any) (any, bool) {
	if len(ml.keys) == 1 {
		switch v := obj[ml.keys[0]].(type) {
		case bool, float64, int64, string:
			return v, true
		}
		return nil, false
	}
	var b strings.Builder
	for _, key := range ml.keys {
		switch v := obj[key].(type) {
		case bool:
			fmt.Fprintf(&b, "\x00%t", v)
		case float64:
			fmt.Fprintf(&b, "\x00%f", v)
		case int64:
			fmt.Fprintf(&b, "\x00%d", v)
		case string:
			fmt.Fprintf(&b, "\x00%q", v)
		default:
			return nil, false
		}
	}
	return b.String(), true
}

func (ml *mapList) get(obj any) any {
	if ml == nil {
		return nil
	}
	m, ok := obj.(map[string]any)
	if !ok {
		return nil
	}
	k, ok := ml.keyFor(m)
	if !ok {
		return nil
	}
	return ml.keyed[k]
}

// correlation pairs a new value with its old counterpart for ratcheting:
// errors of rules that don't use oldSelf on a value that did not change
// are not reported, so that tightened rules don't block unrelated updates.
type correlation struct {
	old, new any
	schema   *apiextensionsv1.JSONSchemaProps
	equal    *bool
	mapList  *mapList
	children map[any]*correlation
}

func (c *correlation) child(k any, old, new any, s *apiextensionsv1.JSONSchemaProps) *correlation {
	if existing, ok := c.children[k]; ok {
		return existing
	}
	if c.children == nil {
		c.children = map[any]*correlation{}
	}
	r := &correlation{old: old, new: new, schema: s}
	c.children[k] = r
	return r
}

func (c *correlation) key(field string) *correlation {
	if c == nil || c.schema == nil {
		return nil
	}
	oldMap, ok1 := c.old.(map[string]any)
	newMap, ok2 := c.new.(map[string]any)
	if !ok1 || !ok2 {
		return nil
	}
	ov, ok1 := oldMap[field]
	nv, ok2 := newMap[field]
	if !ok1 || !ok2 {
		return nil
	}
	var s *apiextensionsv1.JSONSchemaProps
	if p, ok := c.schema.Properties[field]; ok {
		s = &p
	} else if s = additionalSchema(c.schema); s == nil {
		return nil
	}
	return c.child(field, ov, nv, s)
}

func (c *correlation) index(i int) *correlation {
	if c == nil || c.schema == nil {
		return nil
	}
	newList, ok := c.new.([]any)
	oldList, ok2 := c.old.([]any)
	if !ok || !ok2 || len(newList) <= i || itemsSchema(c.schema) == nil {
		return nil
	}
	if c.mapList == nil {
		c.mapList = makeMapList(c.schema, oldList)
	}
	ov := c.mapList.get(newList[i])
	if ov == nil {
		return nil
	}
	return c.child(i, ov, newList[i], itemsSchema(c.schema))
}

func (c *correlation) deepEqual() bool {
	if c == nil {
		return false
	}
	if c.equal != nil {
		return *c.equal
	}
	eq := c.computeEqual()
	c.equal = &eq
	return eq
}

func (c *correlation) computeEqual() bool {
	if c.new == nil || c.old == nil {
		return c.new == nil && c.old == nil
	}
	switch nv := c.new.(type) {
	case []any:
		ov, ok := c.old.([]any)
		if !ok || len(ov) != len(nv) {
			return false
		}
		for i := range nv {
			ch := c.index(i)
			if ch == nil {
				if c.mapList == nil {
					return reflect.DeepEqual(ov, nv)
				}
				return false
			}
			if !ch.deepEqual() {
				return false
			}
		}
		return true
	case map[string]any:
		ov, ok := c.old.(map[string]any)
		if !ok || len(ov) != len(nv) {
			return false
		}
		for k := range nv {
			ch := c.key(k)
			if ch == nil || !ch.deepEqual() {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(c.old, c.new)
}

// ratchet is the correlation of the current node, and of the nearest
// ancestor that had one (which decides for nodes that cannot be
// correlated, such as items of atomic lists).
type ratchet struct {
	current, parent *correlation
}

func (r ratchet) shouldRatchet() bool {
	if r.current != nil {
		return r.current.deepEqual()
	}
	return r.parent.deepEqual()
}

func (r ratchet) key(field string) ratchet {
	if r.current == nil {
		return r
	}
	if r.parent == nil && (field == "apiVersion" || field == "kind") {
		// Old and new are always converted to the same apiVersion and
		// kind, so their equality says nothing.
		return ratchet{}
	}
	return ratchet{current: r.current.key(field), parent: r.current}
}

func (r ratchet) index(i int) ratchet {
	if r.current == nil {
		return r
	}
	return ratchet{current: r.current.index(i), parent: r.current}
}
