package crd

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"

	"skiff/server/registry"
)

// column is one additionalPrinterColumn with its parsed JSONPath.
type column struct {
	def  apiextensionsv1.CustomResourceColumnDefinition
	path *jsonpath.JSONPath // nil when the path does not parse: the cell is empty
}

// table prints a version's objects as upstream's CRD table convertor does:
// Name, then the additionalPrinterColumns (Age alone when there are none),
// dates as ages, a cell whose path finds nothing left empty.
func table(v *apiextensionsv1.CustomResourceDefinitionVersion) *registry.Table {
	defs := v.AdditionalPrinterColumns
	if len(defs) == 0 {
		defs = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date",
			Description: "CreationTimestamp is a timestamp representing the server time when this object was created.", JSONPath: ".metadata.creationTimestamp"}}
	}
	t := &registry.Table{Columns: []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name",
		Description: "Name must be unique within a namespace. It is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically."}}}
	cols := make([]column, 0, len(defs))
	for _, d := range defs {
		t.Columns = append(t.Columns, metav1.TableColumnDefinition{Name: d.Name, Type: d.Type, Format: d.Format, Description: d.Description, Priority: d.Priority})
		c := column{def: d}
		p := jsonpath.New(d.Name)
		if err := p.Parse(fmt.Sprintf("{%s}", d.JSONPath)); err == nil {
			p.AllowMissingKeys(true)
			c.path = p
		}
		cols = append(cols, c)
	}
	t.Cells = func(obj runtime.Object) ([]any, error) {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		cells := make([]any, 0, len(cols)+1)
		cells = append(cells, acc.GetName())
		m := content(obj)
		for _, c := range cols {
			cells = append(cells, c.cell(m, time.Now()))
		}
		return cells, nil
	}
	return t
}

// cell evaluates the column on an object: the first value found, typed as
// the column says, or nil.
func (c column) cell(obj map[string]any, now time.Time) any {
	if c.path == nil || obj == nil {
		return nil
	}
	results, err := c.path.FindResults(obj)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	val := results[0][0]
	if !val.IsValid() || (val.Kind() == reflect.Interface || val.Kind() == reflect.Pointer) && val.IsNil() {
		return nil
	}
	v := val.Interface()
	switch c.def.Type {
	case "date":
		s, ok := v.(string)
		if !ok {
			return nil
		}
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil
		}
		return duration.HumanDuration(now.Sub(ts))
	case "integer":
		switch n := v.(type) {
		case int64, int32, int:
			return n
		case float64:
			if n == float64(int64(n)) {
				return int64(n)
			}
		}
		return nil
	case "number":
		switch v.(type) {
		case int64, int32, int, float64:
			return v
		}
		return nil
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
		return nil
	}
	switch v.(type) {
	case string:
		return v
	case map[string]any, []any:
		var buf bytes.Buffer
		p := jsonpath.New("cell")
		if p.Parse("{.}") == nil && p.Execute(&buf, v) == nil {
			return strings.TrimSpace(buf.String())
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprint(v)
}
