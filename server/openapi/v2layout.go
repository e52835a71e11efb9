package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// v2Layout is the encoded Swagger 2.0 document of the built-ins with where
// its paths and definitions objects close, so that other entries (the
// CRDs') can be spliced in without encoding the built-ins again.
type v2Layout struct {
	raw                 []byte
	pathsEnd, defsEnd   int // offsets of the closing braces
	pathNames, defNames map[string]bool
}

// encodeV2 writes {"swagger":"2.0","info":…,"paths":{…},"definitions":{…}}.
func encodeV2(info *spec.Info, paths map[string]spec.PathItem, defs map[string]*spec.Schema) (v2Layout, error) {
	l := v2Layout{pathNames: make(map[string]bool, len(paths)), defNames: make(map[string]bool, len(defs))}
	infoRaw, err := json.Marshal(info)
	if err != nil {
		return l, fmt.Errorf("encode OpenAPI v2 info: %w", err)
	}
	encPaths := make(map[string]json.RawMessage, len(paths))
	for k, v := range paths {
		if encPaths[k], err = json.Marshal(v); err != nil {
			return l, fmt.Errorf("encode OpenAPI v2 path %s: %w", k, err)
		}
		l.pathNames[k] = true
	}
	encDefs := make(map[string]json.RawMessage, len(defs))
	for k, v := range defs {
		if encDefs[k], err = json.Marshal(v); err != nil {
			return l, fmt.Errorf("encode OpenAPI v2 definition %s: %w", k, err)
		}
		l.defNames[k] = true
	}
	var buf bytes.Buffer
	buf.WriteString(`{"swagger":"2.0","info":`)
	buf.Write(infoRaw)
	buf.WriteString(`,"paths":{`)
	writeEntries(&buf, encPaths, nil, false)
	l.pathsEnd = buf.Len()
	buf.WriteString(`},"definitions":{`)
	writeEntries(&buf, encDefs, nil, false)
	l.defsEnd = buf.Len()
	buf.WriteString(`}}`)
	l.raw = buf.Bytes()
	return l, nil
}

// writeEntries writes the "key":value pairs of entries in key order,
// leaving out the keys in skip; comma says whether one goes before the
// first.
func writeEntries(buf *bytes.Buffer, entries map[string]json.RawMessage, skip map[string]bool, comma bool) {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if comma {
			buf.WriteByte(',')
		}
		comma = true
		key, _ := json.Marshal(k) // a string always encodes
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(entries[k])
	}
}

// with is the document with the CRDs' paths and definitions added. The
// built-ins win a clash, as upstream's merge keeps the static spec's.
func (l v2Layout) with(p *crdParts) []byte {
	var buf bytes.Buffer
	buf.Grow(len(l.raw) + 64<<10)
	buf.Write(l.raw[:l.pathsEnd])
	writeEntries(&buf, p.v2Paths, l.pathNames, len(l.pathNames) > 0)
	buf.Write(l.raw[l.pathsEnd:l.defsEnd])
	writeEntries(&buf, p.v2Defs, l.defNames, len(l.defNames) > 0)
	buf.Write(l.raw[l.defsEnd:])
	return buf.Bytes()
}
