package openapi

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func BenchmarkBuild(b *testing.B) {
	for b.Loop() {
		if _, err := Build(builtinResources(), "Kubernetes", "v1.33.0"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetCustomResources is the cost of a CRD change: the CRDs are
// described again, the built-ins are not.
func BenchmarkSetCustomResources(b *testing.B) {
	d, err := Build(builtinResources(), "Kubernetes", "v1.33.0")
	if err != nil {
		b.Fatal(err)
	}
	p := NewPublished(d)
	crds := []*apiextensionsv1.CustomResourceDefinition{decodeCRD(b, widgetCRD), decodeCRD(b, gadgetCRD)}
	for b.Loop() {
		if err := p.SetCustomResources(crds); err != nil {
			b.Fatal(err)
		}
		p.cur.Load().v2.get() // the spliced v2 document, as the first request makes it
	}
}
