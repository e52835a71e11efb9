package openapi

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// patchMediaTypes are the bodies a PATCH accepts; kubectl picks one by
// the kind of patch it sends.
func patchMediaTypes() []string {
	return []string{
		"application/json-patch+json",
		"application/merge-patch+json",
		"application/strategic-merge-patch+json",
		"application/apply-patch+yaml",
	}
}

// consumedMediaTypes are the request bodies an operation accepts.
func consumedMediaTypes(op operation) []string {
	switch {
	case op.patch && op.patchTypes != nil:
		return op.patchTypes
	case op.patch:
		return patchMediaTypes()
	case op.consumes != nil:
		return op.consumes
	}
	return []string{"*/*"}
}

// producedMediaTypes are the response encodings an operation advertises.
func producedMediaTypes(op operation, text bool) []string {
	switch {
	case text:
		return []string{"text/plain", "application/json", "application/yaml"}
	case op.watch:
		return []string{"application/json", "application/yaml", "application/json;stream=watch"}
	}
	return []string{"application/json", "application/yaml"}
}

// opExtensions are the x-kubernetes-action and x-kubernetes-group-version-kind
// of an operation. kubectl finds the operations of a kind by the latter, so
// it must be a plain {group, kind, version} object.
func opExtensions(op operation) spec.Extensions {
	ext := spec.Extensions{}
	if op.action != "" {
		ext[extAction] = op.action
	}
	if op.gvk != nil {
		ext[extGVK] = gvkObject(*op.gvk)
	}
	return ext
}

func gvkObject(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "kind": gvk.Kind, "version": gvk.Version}
}

// renderV2Paths renders the operations as Swagger 2.0. Parameters are
// written inline: kubectl's field validation check reads the PATCH
// operation's own parameters.
func renderV2Paths(items []pathItem) *spec.Paths {
	paths := &spec.Paths{Paths: map[string]spec.PathItem{}}
	for _, it := range items {
		var pi spec.PathItem
		pi.Parameters = v2Params(it.params)
		for _, op := range it.ops {
			o := v2Operation(op, tagName(it.gv))
			switch op.method {
			case "get":
				pi.Get = o
			case "put":
				pi.Put = o
			case "post":
				pi.Post = o
			case "patch":
				pi.Patch = o
			case "delete":
				pi.Delete = o
			}
		}
		paths.Paths[it.path] = pi
	}
	return paths
}

func v2Params(ps []param) []spec.Parameter {
	var out []spec.Parameter
	for _, p := range ps {
		var sp spec.Parameter
		sp.Name, sp.In, sp.Description, sp.Required, sp.Type = p.name, p.in, p.doc, p.required, p.typ
		out = append(out, sp)
	}
	return out
}

func v2Operation(op operation, tag string) *spec.Operation {
	o := &spec.Operation{}
	o.ID, o.Description, o.Schemes, o.Tags = op.id, op.doc, []string{"https"}, []string{tag}
	o.Consumes = consumedMediaTypes(op)
	o.Produces = producedMediaTypes(op, hasText(op))
	o.Parameters = v2Params(op.params)
	if op.body != "" {
		body := refSchema(v2RefPrefix + op.body)
		var bp spec.Parameter
		bp.Name, bp.In, bp.Required, bp.Schema = "body", "body", !op.bodyOptional, &body
		o.Parameters = append([]spec.Parameter{bp}, o.Parameters...)
	}
	o.Responses = &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{}}}
	for _, r := range op.responses {
		var sr spec.Response
		sr.Description = r.doc
		if s := responseSchema(r, v2RefPrefix); s != nil {
			sr.Schema = s
		}
		o.Responses.StatusCodeResponses[r.code] = sr
	}
	o.Extensions = opExtensions(op)
	return o
}

// renderV3Paths renders the operations as OpenAPI 3.0.
func renderV3Paths(items []pathItem) *spec3.Paths {
	paths := &spec3.Paths{Paths: map[string]*spec3.Path{}}
	for _, it := range items {
		p := &spec3.Path{}
		p.Parameters = v3Params(it.params)
		for _, op := range it.ops {
			o := v3Operation(op, tagName(it.gv))
			switch op.method {
			case "get":
				p.Get = o
			case "put":
				p.Put = o
			case "post":
				p.Post = o
			case "patch":
				p.Patch = o
			case "delete":
				p.Delete = o
			}
		}
		paths.Paths[it.path] = p
	}
	return paths
}

func v3Params(ps []param) []*spec3.Parameter {
	var out []*spec3.Parameter
	for _, p := range ps {
		s := typed(p.typ, "")
		sp := &spec3.Parameter{}
		sp.Name, sp.In, sp.Description, sp.Required, sp.Schema = p.name, p.in, p.doc, p.required, &s
		out = append(out, sp)
	}
	return out
}

func v3Operation(op operation, tag string) *spec3.Operation {
	o := &spec3.Operation{}
	o.OperationId, o.Description, o.Tags = op.id, op.doc, []string{tag}
	o.Parameters = v3Params(op.params)
	if op.body != "" {
		types := consumedMediaTypes(op)
		body := refSchema(v3RefPrefix + op.body)
		o.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{
			Content: mediaTypes(types, &body), Required: !op.bodyOptional,
		}}
	}
	o.Responses = &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{}}}
	for _, r := range op.responses {
		sr := &spec3.Response{ResponseProps: spec3.ResponseProps{Description: r.doc}}
		if s := responseSchema(r, v3RefPrefix); s != nil {
			sr.Content = mediaTypes(producedMediaTypes(op, r.text), s)
		}
		o.Responses.StatusCodeResponses[r.code] = sr
	}
	o.Extensions = opExtensions(op)
	return o
}

func mediaTypes(types []string, s *spec.Schema) map[string]*spec3.MediaType {
	out := make(map[string]*spec3.MediaType, len(types))
	for _, t := range types {
		out[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: s}}
	}
	return out
}

func responseSchema(r response, refPrefix string) *spec.Schema {
	switch {
	case r.text:
		s := typed("string", "")
		return &s
	case r.body != "":
		s := refSchema(refPrefix + r.body)
		return &s
	}
	return nil
}

func hasText(op operation) bool {
	for _, r := range op.responses {
		if r.text {
			return true
		}
	}
	return false
}
