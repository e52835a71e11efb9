package printers

import (
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// customResourceDefinitionPrinter has the columns of upstream's CRD table
// convertor: the served versions (the storage one marked), the creation
// time as a date, and with -o wide the group, kind, short names and
// whether the CRD is established.
func customResourceDefinitionPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Scope", Type: "string", Description: "Cluster/Namespaced"},
			{Name: "Versions", Type: "string", Description: "Served versions"},
			{Name: "Created At", Type: "date", Description: objectMetaDoc("creationTimestamp")},
			{Name: "Group", Type: "string", Priority: 1, Description: "API group"},
			{Name: "Kind", Type: "string", Priority: 1, Description: "CustomResource kind"},
			{Name: "ShortNames", Type: "string", Priority: 1, Description: "Short names"},
			{Name: "Established", Type: "boolean", Priority: 1, Description: "Established status"},
		},
		Cells: customResourceDefinitionCells,
	}
}

func customResourceDefinitionCells(obj runtime.Object, _ time.Time) ([]interface{}, error) {
	crd, err := typed[apiextensionsv1.CustomResourceDefinition](obj)
	if err != nil {
		return nil, err
	}
	var versions []string
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		label := v.Name
		if v.Storage {
			label += "(storage)"
		}
		versions = append(versions, label)
	}
	slices.Sort(versions)
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	return []interface{}{crd.Name, string(crd.Spec.Scope), strings.Join(versions, ","),
		crd.CreationTimestamp.UTC().Format(time.RFC3339), crd.Spec.Group, crd.Spec.Names.Kind,
		strings.Join(crd.Spec.Names.ShortNames, ","), established}, nil
}
