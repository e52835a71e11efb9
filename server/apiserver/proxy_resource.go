package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"skiff/server/serviceendpoint"
	"skiff/server/storage"
)

// proxyMethods are the methods pods/proxy, services/proxy and nodes/proxy
// forward (upstream's ConnectMethods).
var proxyMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions}

// serveProxy serves the proxy subresources as kube-apiserver does:
// /api/v1/namespaces/{ns}/pods/{[scheme:]name[:port]}/proxy[/path],
// the same for services, and /api/v1/nodes/{name[:port]}/proxy[/path].
// The request goes to the pod's IP, a ready endpoint of the Service, or
// the node's kubelet, with the path below .../proxy and the query kept.
func (s *Server) serveProxy(q *request) {
	gr := schema.GroupResource{Resource: q.res.Name + "/proxy"}
	// A legacy /watch/... path parses as a watch of .../proxy, which has
	// no such verb.
	if !slices.Contains([]string{"pods", "services", "nodes"}, q.res.Name) || q.info.Verb != proxyVerb(q.r.Method) {
		writeError(q.w, q.r, apierrors.NewNotFound(gr, q.info.Name))
		return
	}
	if !slices.Contains(proxyMethods, q.r.Method) {
		writeError(q.w, q.r, apierrors.NewMethodNotSupported(gr, q.r.Method))
		return
	}
	kp := s.cfg.Kubelet
	if kp == nil {
		writeError(q.w, q.r, apierrors.NewServiceUnavailable("proxying to the cluster is not configured on this server"))
		return
	}
	ctx := q.r.Context()
	var (
		loc *url.URL
		rt  http.RoundTripper = kp.backends
		err error
	)
	switch q.res.Name {
	case "pods":
		loc, err = s.podLocation(ctx, q)
	case "services":
		loc, err = s.serviceLocation(ctx, q)
	case "nodes":
		loc, rt, err = s.nodeLocation(ctx, q, kp)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, q.info.ProxyPath)
	if loc.Scheme == "" {
		loc.Scheme = "http"
	}
	(&backendProxy{location: loc, transport: rt, log: s.log}).ServeHTTP(q.w, q.r)
}

// podLocation is upstream's pod ResourceLocation: the pod's first IP, at
// the port asked for or else the first declared container port.
func (s *Server) podLocation(ctx context.Context, q *request) (*url.URL, error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(q.info.Name)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid pod request %q", q.info.Name))
	}
	e, err := s.st.Get(ctx, q.res, q.info.Namespace, name)
	if err != nil {
		return nil, err
	}
	pod := e.Obj.(*corev1.Pod)
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	ip := ""
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}
	// Only routable addresses: a pod (host network or not) must not make
	// the API server talk to its own loopback or link-local services.
	if addr := net.ParseIP(ip); addr == nil || !addr.IsGlobalUnicast() {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	loc := &url.URL{Scheme: scheme, Host: ip}
	switch {
	case port != "":
		loc.Host = net.JoinHostPort(ip, port)
	case strings.Contains(ip, ":"):
		loc.Host = "[" + ip + "]"
	}
	return loc, nil
}

// serviceLocation is upstream's service ResourceLocation: a port number
// names the Service port it belongs to; the port name picks the
// EndpointSlice port (whose number is the resolved targetPort), and a
// random ready endpoint that really is a pod of the namespace serves it.
func (s *Server) serviceLocation(ctx context.Context, q *request) (*url.URL, error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(q.info.Name)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid service request %q", q.info.Name))
	}
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		e, err := s.st.Get(ctx, q.res, q.info.Namespace, name)
		if err != nil {
			return nil, err
		}
		found := false
		for _, sp := range e.Obj.(*corev1.Service).Spec.Ports {
			if int64(sp.Port) == n {
				port, found = sp.Name, true
				break
			}
		}
		if !found {
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, name))
		}
	}
	slicesRes, ok := s.reg.Lookup("discovery.k8s.io", "v1", "endpointslices")
	podsRes, okPods := s.reg.Lookup("", "v1", "pods")
	if !ok || !okPods {
		return nil, apierrors.NewInternalError(errors.New("endpointslices or pods are not registered"))
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	entries, _, err := s.st.Cache().List(slicesRes, storage.Predicate{Namespace: q.info.Namespace, Label: sel})
	if err != nil {
		return nil, err
	}
	isPod := func(ep *discoveryv1.Endpoint) bool {
		if ep.TargetRef == nil || ep.TargetRef.Namespace != q.info.Namespace {
			return false
		}
		pe := s.st.Cache().Get(podsRes, q.info.Namespace, ep.TargetRef.Name)
		if pe == nil {
			return false
		}
		for _, ip := range pe.Obj.(*corev1.Pod).Status.PodIPs {
			if ip.IP == ep.Addresses[0] {
				return true
			}
		}
		return false
	}
	hostPort, err := randomEndpoint(name, entries, port, isPod)
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: scheme, Host: hostPort}, nil
}

// randomEndpoint picks a random ready endpoint of the slices (IPv4 ones
// first, the cluster's primary family) serving port name portName that
// valid accepts.
func randomEndpoint(svc string, entries []*storage.Entry, portName string, valid func(*discoveryv1.Endpoint) bool) (string, error) {
	list := make([]*discoveryv1.EndpointSlice, 0, len(entries))
	for _, e := range entries {
		list = append(list, e.Obj.(*discoveryv1.EndpointSlice))
	}
	return serviceendpoint.Random(svc, list, portName, discoveryv1.AddressTypeIPv4, valid)
}

// nodeLocation is upstream's node ResourceLocation: the kubelet (HTTPS,
// with the API server's kubelet client certificate) unless another port
// is asked for, which is reached as a plain backend.
func (s *Server) nodeLocation(ctx context.Context, q *request, kp *KubeletProxy) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(q.info.Name)
	if !ok {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid node request %q", q.info.Name))
	}
	if _, err := s.st.Get(ctx, q.res, "", name); err != nil {
		return nil, nil, err
	}
	hostPort, err := s.kubeletHost(ctx, name, kp.cfg.DefaultPort)
	if err != nil {
		return nil, nil, err
	}
	host, kubeletPort, _ := net.SplitHostPort(hostPort)
	if err := proxyableHost(ctx, host); err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	if port == "" || port == kubeletPort {
		return &url.URL{Scheme: "https", Host: hostPort}, kp.transport, nil
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}, kp.backends, nil
}

// proxyableHost refuses node addresses that resolve to loopback or
// link-local addresses, as upstream does: a node must not point the API
// server at its own local services.
func proxyableHost(ctx context.Context, host string) error {
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return fmt.Errorf("cannot resolve node address %q: %w", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if !ip.IsGlobalUnicast() {
			return fmt.Errorf("address not allowed")
		}
	}
	return nil
}
