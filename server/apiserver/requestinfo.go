package apiserver

import (
	"net/http"
	"strings"
)

// requestInfo is what a request path and method say about a request.
type requestInfo struct {
	// Resource requests are under /api/v1 or /apis/<group>/<version> and
	// name a resource; everything else (discovery, /healthz) is not.
	Resource    bool
	Verb        string
	Group       string
	Version     string
	Namespace   string
	Name        string
	Plural      string
	Subresource string
	Path        string
	// ProxyPath is what follows .../{name}/proxy (the proxy subresource
	// alone takes a path below it), "" when nothing does.
	ProxyPath string
}

// parseRequest reads the path and method. Paths:
//
//	/api/v1/<resource>[/<name>[/<subresource>]]
//	/api/v1/namespaces/<ns>/<resource>[/<name>[/<subresource>]]
//	/apis/<group>/<version>/... (the same below)
//	/api/v1/watch/... and /apis/<g>/<v>/watch/... (legacy watch paths)
func parseRequest(r *http.Request) requestInfo {
	info := requestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.Version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.Group, info.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return info
	}
	legacyWatch := false
	if parts[0] == "watch" {
		legacyWatch, parts = true, parts[1:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		// /namespaces/<ns>/<resource>...; but /namespaces/<name>/status is
		// the namespace resource itself (status and finalize subresources).
		if len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize") {
			info.Plural, info.Name, info.Subresource = "namespaces", parts[1], parts[2]
			parts = nil
		} else {
			info.Namespace, parts = parts[1], parts[2:]
		}
	}
	if len(parts) > 0 {
		info.Plural = parts[0]
	}
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = parts[2]
	}
	if info.Subresource == "proxy" && !legacyWatch {
		info.Resource, info.Verb, info.ProxyPath = true, proxyVerb(r.Method), proxySubpath(r.URL.Path, parts[3:])
		return info
	}
	if len(parts) > 3 || info.Plural == "" {
		return requestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	}
	info.Resource = true
	info.Verb = resourceVerb(r, info.Name != "", legacyWatch)
	return info
}

// proxyVerb is upstream's verb for a proxy request: the method alone
// decides (a ?watch=true is the backend's business), and methods without
// a verb (OPTIONS) get none, so only a "*" rule allows them.
func proxyVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// proxySubpath is the path below .../proxy as upstream passes it on: a
// leading slash when there is any, and the request's trailing slash kept.
func proxySubpath(full string, rest []string) string {
	p := strings.Join(rest, "/")
	if p != "" {
		p = "/" + p
	}
	if strings.HasSuffix(full, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// resourceVerb maps the method to the Kubernetes verb authorization sees.
func resourceVerb(r *http.Request, named, legacyWatch bool) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		w := r.URL.Query().Get("watch")
		if legacyWatch || w == "true" || w == "1" {
			return "watch"
		}
		if named {
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(r.Method)
}
