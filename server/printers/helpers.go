package printers

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Descriptions shared by many kinds; upstream uses the same literal strings.
const (
	containersDescription = "Names of each container in the template."
	imagesDescription     = "Images referenced by each container in the template."
)

func objectMetaDoc(field string) string {
	return metav1.ObjectMeta{}.SwaggerDoc()[field]
}

// nameColumn is the column kubectl decorates with the kind ("pod/foo").
func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc("name")}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc("creationTimestamp")}
}

func column(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

// wideColumn is shown by kubectl only with -o wide.
func wideColumn(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Priority: 1, Description: description}
}

// translateTimestampSince is the AGE text: a rough human duration, or
// <unknown> for an unset timestamp.
func translateTimestampSince(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func translateMicroTimestampSince(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// typed returns obj as *T. Unstructured objects are converted so a caller
// that keeps objects in unstructured form still gets the typed printer.
func typed[T any](obj runtime.Object) (*T, error) {
	switch o := any(obj).(type) {
	case *T:
		if o == nil {
			return nil, fmt.Errorf("nil %T", obj)
		}
		return o, nil
	case *unstructured.Unstructured:
		if o == nil {
			return nil, fmt.Errorf("nil %T", obj)
		}
		// k8s.io/api Go type names are the kind names, which catches an
		// unstructured object of another kind that would convert silently.
		if want := reflect.TypeFor[T]().Name(); o.GetKind() != "" && o.GetKind() != want {
			return nil, fmt.Errorf("expected kind %s, got %s", want, o.GetKind())
		}
		out := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
			return nil, fmt.Errorf("converting %s to %T: %w", o.GetKind(), out, err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("expected %T, got %T", (*T)(nil), obj)
	}
}

// isNil reports whether obj is nil or a typed nil pointer.
func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// layoutContainerCells joins container names and images for the wide
// CONTAINERS and IMAGES columns.
func layoutContainerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, 0, len(containers))
	im := make([]string, 0, len(containers))
	for _, c := range containers {
		n = append(n, c.Name)
		im = append(im, c.Image)
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func printBool(value bool) string {
	if value {
		return "True"
	}
	return "False"
}

func printBoolPtr(value *bool) string {
	if value == nil {
		return "<unset>"
	}
	return printBool(*value)
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// listWithMore joins the first max items and says how many were left out;
// empty is printed when the joined text would be blank.
func listWithMore(items []string, max int, empty string) string {
	shown := items
	if len(shown) > max {
		shown = shown[:max]
	}
	joined := strings.Join(shown, ",")
	if len(items) > max {
		return fmt.Sprintf("%s + %d more...", joined, len(items)-max)
	}
	if joined == "" {
		return empty
	}
	return joined
}
