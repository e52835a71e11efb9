package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// output is the representation a client asked for in Accept.
type output int

const (
	outJSON output = iota
	outYAML
	outTable
	outPartialMetadata
	outProtobuf
)

// negotiate reads Accept. Clients list what they take in order of
// preference; the first one served here wins. Only protobuf (or CBOR) with
// no alternative gets 406, and client-go then retries with JSON.
func negotiate(r *http.Request) (output, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return outJSON, nil
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "application/*", "*/*":
			switch {
			case params["as"] == "Table" && params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1"):
				return outTable, nil
			case strings.HasPrefix(params["as"], "PartialObjectMetadata") && params["g"] == "meta.k8s.io":
				return outPartialMetadata, nil
			case params["as"] != "":
				continue // a representation not served here
			}
			return outJSON, nil
		case "application/yaml":
			if params["as"] == "" {
				return outYAML, nil
			}
		case protobufType:
			if params["as"] == "" {
				return outProtobuf, nil
			}
		}
	}
	return outJSON, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", schema.GroupResource{}, "",
		fmt.Sprintf("only the following media types are accepted: application/json, application/yaml (got %q)", accept), 0, false)
}

// writeJSON writes a value with a status code as JSON (or YAML).
func writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeRaw(w, r, code, b)
}

// writeRaw writes an already encoded JSON body, converted to YAML when asked.
func writeRaw(w http.ResponseWriter, r *http.Request, code int, b []byte) {
	ct := "application/json"
	if out, _ := negotiate(r); out == outYAML {
		if y, err := yaml.JSONToYAML(b); err == nil {
			b, ct = y, "application/yaml"
		}
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(code)
	w.Write(b)
}

// writeError writes err as a metav1.Status with its code. Errors that are
// not API errors are internal errors: their text is logged, not shown.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		slog.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		status = apierrors.NewInternalError(errors.New("an internal error occurred"))
	}
	s := status.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	if s.Status == "" {
		s.Status = metav1.StatusFailure
	}
	code := int(s.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	b, _ := json.Marshal(s)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	// An unavailable store says when to retry in the header too: client-go
	// honours Retry-After on 5xx and retries, possibly on another server.
	// (429s keep theirs as they are: flow control sets its own header,
	// an eviction's budget refusal is not retried by the client.)
	if s.Details != nil && s.Details.RetryAfterSeconds > 0 && code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(s.Details.RetryAfterSeconds)))
	}
	w.WriteHeader(code)
	w.Write(b)
}

// writeObject writes one object in the representation asked for.
func writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object, raw []byte) {
	if out, _ := negotiate(r); out == outProtobuf {
		if m, ok := obj.(protoMarshaler); ok {
			gvk := obj.GetObjectKind().GroupVersionKind()
			if item, err := m.Marshal(); err == nil {
				if b, err := envelope(gvk.GroupVersion().String(), gvk.Kind, item); err == nil {
					writeProto(w, code, b)
					return
				}
			}
		}
	}
	if raw == nil {
		writeJSON(w, r, code, obj)
		return
	}
	writeRaw(w, r, code, raw)
}
