package openapi

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// widgetCRD has what publishing must handle: two served versions and an
// unserved one, status and scale, printer columns, a nested schema with
// int-or-string, nullable, defaults, enums, a map-list, unknown fields kept
// in one place and an embedded resource.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    selectableFields:
    - jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        description: Widget is a thing for testing.
        type: object
        properties:
          spec:
            description: Specification of the widget.
            type: object
            required: [color]
            properties:
              color:
                description: Color of the widget.
                type: string
                enum: [red, green]
              replicas:
                description: How many widgets.
                type: integer
                format: int32
                minimum: 0
                default: 1
              port:
                description: Port by number or name.
                x-kubernetes-int-or-string: true
              note:
                description: An optional note.
                type: string
                nullable: true
              parts:
                description: Parts by name.
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string, description: Name of the part.}
                    size: {type: integer}
              extra:
                description: Anything at all.
                type: object
                x-kubernetes-preserve-unknown-fields: true
                properties:
                  known: {type: string}
              template:
                description: An embedded object.
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
              labels:
                type: object
                additionalProperties: {type: string}
          status:
            description: Status of the widget.
            type: object
            properties:
              replicas: {type: integer, description: Observed widgets.}
  - name: v2beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              colour: {type: string, description: Colour in v2beta1.}
  - name: v0
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object}
status:
  conditions:
  - {type: Established, status: "True"}
  - {type: NamesAccepted, status: "True"}
`

// gadgetCRD is cluster-scoped, keeps unknown fields at its root and has
// no subresources.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.tools.example.org
spec:
  group: tools.example.org
  scope: Cluster
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: Gadget keeps whatever it is given.
        type: object
        x-kubernetes-preserve-unknown-fields: true
status:
  conditions:
  - {type: Established, status: "True"}
`

func decodeCRD(t testing.TB, manifest string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(manifest), crd); err != nil {
		t.Fatalf("decode CRD: %v", err)
	}
	return crd
}

func metaFor(t testing.TB) *metaModels {
	t.Helper()
	m, err := newMetaModels()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
