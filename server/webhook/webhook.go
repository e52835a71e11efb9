// Package webhook calls the cluster's webhooks (CRD conversion, and
// admission) as the upstream API server does: JSON over HTTPS to a URL or
// to a Service's endpoint, verified with the configuration's caBundle,
// bounded by a timeout. Its errors say which webhook failed and why.
package webhook

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// DefaultPort is the Service port a webhook is called on when its
// configuration names none, as upstream.
const DefaultPort int32 = 443

// ClientConfig says where a webhook is, whichever API configured it:
// exactly one of URL and Service is set.
type ClientConfig struct {
	// URL is the webhook's location, https://host[:port][/path].
	URL string `json:"url,omitempty"`
	// Service is an in-cluster Service serving the webhook.
	Service *ServiceRef `json:"service,omitempty"`
	// CABundle holds the PEM certificates that verify the webhook's
	// serving certificate; empty means the system's roots.
	CABundle []byte `json:"caBundle,omitempty"`
}

// ServiceRef names a Service port and the path on it.
type ServiceRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Path      string `json:"path,omitempty"`
	// Port is the Service's port number; 0 means DefaultPort.
	Port int32 `json:"port,omitempty"`
}

// port is the Service port the call goes to.
func (s *ServiceRef) port() int32 {
	if s.Port == 0 {
		return DefaultPort
	}
	return s.Port
}

// serverName is the name the webhook's serving certificate must carry, as
// upstream: the Service's DNS name without the cluster domain.
func (s *ServiceRef) serverName() string {
	return s.Name + "." + s.Namespace + ".svc"
}

// hostPort is the address the request is made to before the dialer
// resolves it to an endpoint: what the request line, Host header and
// errors show, as upstream's.
func (s *ServiceRef) hostPort() string {
	return net.JoinHostPort(s.serverName(), strconv.Itoa(int(s.port())))
}

// FromConversion is the configuration of a CRD's conversion webhook.
func FromConversion(cc *apiextensionsv1.WebhookClientConfig) ClientConfig {
	if cc == nil {
		return ClientConfig{}
	}
	out := ClientConfig{CABundle: caBundle(cc.CABundle)}
	if cc.URL != nil {
		out.URL = *cc.URL
	}
	if s := cc.Service; s != nil {
		out.Service = &ServiceRef{Namespace: s.Namespace, Name: s.Name}
		if s.Path != nil {
			out.Service.Path = *s.Path
		}
		if s.Port != nil {
			out.Service.Port = *s.Port
		}
	}
	return out
}

// FromAdmission is the configuration of an admission webhook.
func FromAdmission(cc admissionregistrationv1.WebhookClientConfig) ClientConfig {
	out := ClientConfig{CABundle: caBundle(cc.CABundle)}
	if cc.URL != nil {
		out.URL = *cc.URL
	}
	if s := cc.Service; s != nil {
		out.Service = &ServiceRef{Namespace: s.Namespace, Name: s.Name}
		if s.Path != nil {
			out.Service.Path = *s.Path
		}
		if s.Port != nil {
			out.Service.Port = *s.Port
		}
	}
	return out
}

// caBundle treats a whitespace-only bundle as none, as upstream does.
func caBundle(b []byte) []byte {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return b
}

// Resolver finds where a request to a Service goes.
type Resolver interface {
	// ResolveService returns host:port of a ready endpoint serving the
	// Service port numbered port.
	ResolveService(ctx context.Context, namespace, name string, port int32) (addr string, err error)
}

// DialFunc opens a connection; tests inject one to reach local listeners.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Config configures a Client.
type Config struct {
	// Resolver finds the endpoints of webhook Services; without it only
	// URL webhooks can be called.
	Resolver Resolver
	// Logger gets a debug line per failed call; nil discards.
	Logger *slog.Logger
	// DialContext opens connections; nil is a net.Dialer.
	DialContext DialFunc
	// MaxResponseBytes bounds a webhook's answer; 0 is
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// DefaultMaxResponseBytes bounds a webhook's answer: room for a converted
// list page of large objects, while a runaway webhook cannot exhaust the
// server's memory.
const DefaultMaxResponseBytes int64 = 64 << 20
