package audit

import (
	"bytes"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LogRequestObject records a request body (JSON). Its metadata completes
// the object reference (a create's name is only in the body) at every
// level, as upstream's LogRequestObject; the body itself is kept from
// level Request up. A patch is kept as sent and names nothing.
func (r *Recorder) LogRequestObject(body json.RawMessage, patch bool) {
	if len(body) == 0 {
		return
	}
	var meta struct {
		Metadata *struct {
			Name            string    `json:"name"`
			Namespace       string    `json:"namespace"`
			UID             types.UID `json:"uid"`
			ResourceVersion string    `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if !patch {
		_ = json.Unmarshal(body, &meta) // a body that is no object names nothing
	}
	keep := !r.Level().Less(LevelRequest)
	if keep && r.OmitManagedFields() && !patch {
		body = withoutManagedFields(body)
	}
	r.Update(func(ev *Event) {
		if m := meta.Metadata; m != nil {
			if ev.ObjectRef == nil {
				ev.ObjectRef = &ObjectReference{}
			}
			ref := ev.ObjectRef
			fill(&ref.Namespace, m.Namespace)
			fill(&ref.Name, m.Name)
			fill((*string)(&ref.UID), string(m.UID))
			fill(&ref.ResourceVersion, m.ResourceVersion)
		}
		if keep {
			ev.RequestObject = body
		}
	})
}

func fill(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

// SetResponseCode records the response's status code.
func (r *Recorder) SetResponseCode(code int) {
	r.Update(func(ev *Event) {
		if ev.ResponseStatus == nil {
			ev.ResponseStatus = &metav1.Status{}
		}
		ev.ResponseStatus.Code = int32(code)
	})
}

// SetResponseStatus replaces the recorded response status.
func (r *Recorder) SetResponseStatus(st *metav1.Status) {
	r.Update(func(ev *Event) { ev.ResponseStatus = st })
}

// LogResponseObject records a response body (JSON): a Status fills in the
// response status at every level; the body is kept at RequestResponse,
// unless it is (the start of) a stream, which upstream never logs.
func (r *Recorder) LogResponseObject(body json.RawMessage, streamed bool) {
	if len(body) == 0 {
		return
	}
	var st *metav1.Status
	var probe struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Kind == "Status" && probe.APIVersion == "v1" {
		var full metav1.Status
		if json.Unmarshal(body, &full) == nil {
			// Only the bounded fields, as upstream.
			st = &metav1.Status{Status: full.Status, Message: full.Message, Reason: full.Reason, Details: full.Details, Code: full.Code}
		}
	}
	keep := !streamed && !r.Level().Less(LevelRequestResponse)
	if st == nil && !keep {
		return
	}
	if keep && r.OmitManagedFields() {
		body = withoutManagedFields(body)
	}
	r.Update(func(ev *Event) {
		if st != nil {
			if ev.ResponseStatus != nil && st.Code == 0 {
				st.Code = ev.ResponseStatus.Code
			}
			ev.ResponseStatus = st
		}
		if keep {
			ev.ResponseObject = body
		}
	})
}

// withoutManagedFields drops metadata.managedFields from an object, the
// items of a list and the objects of a Table's rows, as upstream's
// omitManagedFields. A body that is no JSON object is returned as it is.
func withoutManagedFields(body json.RawMessage) json.RawMessage {
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // large integers must come out as they went in
	if dec.Decode(&obj) != nil {
		return body
	}
	changed := dropManaged(obj)
	for _, list := range []string{"items", "rows"} {
		items, _ := obj[list].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			if list == "rows" {
				m, _ = m["object"].(map[string]any)
			}
			if m != nil && dropManaged(m) {
				changed = true
			}
		}
	}
	if !changed {
		return body
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return body
	}
	return out
}

func dropManaged(obj map[string]any) bool {
	meta, _ := obj["metadata"].(map[string]any)
	if _, ok := meta["managedFields"]; !ok {
		return false
	}
	delete(meta, "managedFields")
	return true
}
