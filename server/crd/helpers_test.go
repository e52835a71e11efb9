package crd_test

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"skiff/store"
)

func unstructuredSerializer() runtime.NegotiatedSerializer {
	return serializer.NewCodecFactory(scheme.Scheme).WithoutConversion()
}

func storeListAll(prefix string) store.ListOptions {
	return store.ListOptions{Prefix: prefix}
}
