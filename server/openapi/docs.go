package openapi

import "reflect"

// typeDoc is the description of a definition: the generated SwaggerDoc when
// the type has one, otherwise our own words for the handful of apimachinery
// types that ship without generated documentation.
func typeDoc(t reflect.Type, name string) string {
	if d := swaggerDocs(t)[""]; d != "" {
		return d
	}
	switch name {
	case "io.k8s.apimachinery.pkg.api.resource.Quantity":
		return "Quantity is a fixed-point number written as a string with an optional unit suffix: " +
			"binary SI (Ki, Mi, Gi, Ti, Pi, Ei), decimal SI (m, k, M, G, T, P, E) or a decimal exponent (e3, E6). " +
			"Examples: \"100m\" is a tenth of a CPU, \"128Mi\" is 128 mebibytes. " +
			"Values are kept in canonical form and never lose precision to floating point."
	case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
		return "IntOrString holds either a 32-bit integer or a string, as written. " +
			"Fields of this type, such as a port given by number or by name, accept both forms."
	case "io.k8s.apimachinery.pkg.apis.meta.v1.Time":
		return "Time is a timestamp serialized as an RFC 3339 string with second precision."
	case "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":
		return "MicroTime is a timestamp serialized as an RFC 3339 string with microsecond precision."
	case "io.k8s.apimachinery.pkg.apis.meta.v1.Duration":
		return "Duration is a length of time written as a Go duration string, such as \"30s\" or \"1h5m\"."
	case "io.k8s.apimachinery.pkg.runtime.RawExtension":
		return "RawExtension holds an embedded object of any kind, serialized as the object's own JSON. " +
			"It usually carries apiVersion and kind to tell readers how to decode it."
	}
	return ""
}

// Descriptions of the parameters that do not come from an options type.
const (
	prettyParamDoc    = "If 'true', the response is pretty printed."
	namespaceParamDoc = "namespace the objects live in; it scopes names and authorization"
)
