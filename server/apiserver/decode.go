package apiserver

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"skiff/server/registry"
)

// readBody reads a request body up to the size limit (413 beyond it).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", s.cfg.MaxBodyBytes))
	case err != nil:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading request body: %v", err))
	}
	return body, nil
}

// toJSON converts a YAML body to JSON; JSON passes through.
func toJSON(r *http.Request, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "", "application/json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json":
		return body, nil
	case "application/yaml", "application/apply-patch+yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error converting YAML to JSON: %v", err))
		}
		return j, nil
	}
	return nil, unsupportedMediaType(mt)
}

// fieldValidation is the client's choice for unknown and duplicate fields.
type fieldValidation string

const (
	validationIgnore fieldValidation = "Ignore"
	validationWarn   fieldValidation = "Warn"
	validationStrict fieldValidation = "Strict"
)

func parseFieldValidation(r *http.Request) (fieldValidation, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "":
		return validationWarn, nil
	case "Ignore", "Warn", "Strict":
		return fieldValidation(v), nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of Ignore, Warn or Strict, not %q", v))
	}
}

// decodeBody decodes a request body into `into`: JSON, YAML, or the
// protobuf that client-go's typed clients send by default. Unknown or
// duplicate JSON fields are an error, a warning or ignored per fv.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, body []byte, into runtime.Object, fv fieldValidation) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == protobufType {
		if _, _, err := s.proto.Decode(body, nil, into); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was in an unknown format: %v", err))
		}
		return nil
	}
	data, err := toJSON(r, body)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(data, into, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was in an unknown format: %v", err))
	}
	if len(strictErrs) == 0 {
		return nil
	}
	var msgs []string
	for _, e := range strictErrs {
		msgs = append(msgs, e.Error())
	}
	switch fv {
	case validationStrict:
		return apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
	case validationWarn:
		for _, m := range msgs {
			addWarning(w, m)
		}
	}
	return nil
}

const protobufType = "application/vnd.kubernetes.protobuf"

// decodeObject decodes a body into a new object of res; a body of another
// kind or version is refused.
func (s *Server) decodeObject(w http.ResponseWriter, r *http.Request, res *registry.Resource, body []byte, fv fieldValidation) (runtime.Object, error) {
	if res.Custom {
		return s.decodeCustom(w, r, res, body, fv) // custom.go
	}
	obj := res.New()
	if err := s.decodeBody(w, r, body, obj, fv); err != nil {
		if status, ok := err.(apierrors.APIStatus); ok && status.Status().Message != "" && !strings.HasPrefix(status.Status().Message, "strict decoding") {
			// upstream's wording for a body that does not fit the type
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", res.Kind, res.Version, res.Kind,
				strings.TrimPrefix(status.Status().Message, "the body of the request was in an unknown format: ")))
		}
		return nil, err
	}
	return checkKind(res, obj)
}

// decodeJSONObject decodes a JSON document (a patched object) into a new
// object of res.
func (s *Server) decodeJSONObject(w http.ResponseWriter, res *registry.Resource, data []byte, fv fieldValidation) (runtime.Object, error) {
	r := &http.Request{Header: http.Header{"Content-Type": {"application/json"}}}
	if res.Custom {
		return s.decodeCustom(w, r, res, data, fv)
	}
	obj := res.New()
	if err := s.decodeBody(w, r, data, obj, fv); err != nil {
		return nil, err
	}
	return checkKind(res, obj)
}

func checkKind(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	want := res.GVK()
	if (gvk.Kind != "" && gvk.Kind != want.Kind) || (gvk.Version != "" && gvk.GroupVersion() != want.GroupVersion()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvkString(gvk), want.GroupVersion()))
	}
	obj.GetObjectKind().SetGroupVersionKind(want)
	return obj, nil
}

func gvkString(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String() + ", Kind=" + gvk.Kind
}

// addWarning adds a Warning header as kube-apiserver does (code 299).
func addWarning(w http.ResponseWriter, msg string) {
	w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
}

// unsupportedMediaType is a 415 for a body type the server does not take.
func unsupportedMediaType(mt string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got %q)", mt), 0, false)
}
