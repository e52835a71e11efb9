package openapi

import "testing"

func BenchmarkBuild(b *testing.B) {
	for b.Loop() {
		if _, err := Build(builtinResources(), "Kubernetes", "v1.33.0"); err != nil {
			b.Fatal(err)
		}
	}
}
