package openapi

import (
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// Published is what /openapi serves: the built-in documents, built once,
// with the documents of the current CustomResourceDefinitions added. Each
// change swaps in a new immutable snapshot, so a request always sees one
// consistent set, and ETags (content hashes) change with the content.
type Published struct {
	mu      sync.Mutex // serialises changes; requests only load cur
	builtin *Documents
	crds    *crdParts
	meta    *metaModels // built on the first CRD set
	cur     atomic.Pointer[snapshot]
}

// NewPublished serves builtin, which may be nil until SetBuiltins: the
// built-ins are costly enough to build on first use.
func NewPublished(builtin *Documents) *Published {
	p := &Published{}
	if builtin != nil {
		p.builtin = builtin
		p.cur.Store(builtin.snap)
	}
	return p
}

// SetBuiltins sets the built-in documents; CRDs set earlier are kept.
func (p *Published) SetBuiltins(d *Documents) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.builtin = d
	return p.publishLocked()
}

// SetCustomResources replaces the published CRDs with crds. Only the
// Established ones are published, each in its served versions, as
// upstream. A CRD that cannot be described is left out and reported in the
// error; the rest are published all the same.
func (p *Published) SetCustomResources(crds []*apiextensionsv1.CustomResourceDefinition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meta == nil {
		meta, err := newMetaModels()
		if err != nil {
			return fmt.Errorf("publish CustomResourceDefinitions: %w", err)
		}
		p.meta = meta
	}
	parts, err := buildCRDParts(p.meta, crds)
	if parts == nil {
		return fmt.Errorf("publish CustomResourceDefinitions: %w", err)
	}
	p.crds = parts
	if perr := p.publishLocked(); perr != nil {
		return perr
	}
	if err != nil {
		return fmt.Errorf("publish CustomResourceDefinitions: %w", err)
	}
	return nil
}

// TypeConverter is CRDTypeConverter, reusing the meta definitions built
// for publishing.
func (p *Published) TypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	p.mu.Lock()
	meta := p.meta
	p.mu.Unlock()
	if meta == nil {
		return CRDTypeConverter(crd)
	}
	return crdTypeConverter(meta, crd)
}

// Handler serves the current documents as Documents.Handler does; until
// the built-ins are set it answers 503.
func (p *Published) Handler() http.Handler {
	return snapshotHandler(p.cur.Load)
}

func (p *Published) publishLocked() error {
	if p.builtin == nil {
		return nil
	}
	s, err := combine(p.builtin, p.crds)
	if err != nil {
		return err
	}
	p.cur.Store(s)
	return nil
}

// combine is the snapshot of the built-ins with the CRDs' parts. Built-in
// group-versions win over custom ones of the same name, as their paths and
// definitions do in v2.
func combine(b *Documents, crds *crdParts) (*snapshot, error) {
	if crds == nil || (len(crds.v2Paths) == 0 && len(crds.v2Defs) == 0 && len(crds.v3) == 0) {
		return b.snap, nil
	}
	v3 := maps.Clone(b.v3)
	for key, doc := range crds.v3 {
		if _, builtin := v3[key]; !builtin {
			v3[key] = doc
		}
	}
	index, err := indexDocument(v3)
	if err != nil {
		return nil, err
	}
	layout := b.v2doc
	v2 := &lazyDocument{make: func() *document {
		return newDocument(layout.with(crds), v2ProtoTypes(), v2Proto)
	}}
	return &snapshot{v2: v2, v3: v3, index: index}, nil
}
