// Package serviceendpoint chooses where a request the API server itself
// sends to a Service goes: the Service port a port number names, and a
// random ready endpoint of the Service's EndpointSlices serving it. The
// services/proxy subresource and the webhook client both use it, so the
// two route a request to a Service the same way, as upstream's
// proxy.ResolveEndpoint and proxy.RandomEndpoint do.
package serviceendpoint

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PortByNumber finds the port of svc whose number is port; its name picks
// the EndpointSlice port (whose number is the resolved targetPort). The
// error is upstream's 503.
func PortByNumber(svc *corev1.Service, port int32) (*corev1.ServicePort, error) {
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			return &svc.Spec.Ports[i], nil
		}
	}
	return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", port, svc.Name))
}

// PreferredAddressType is the address family of a Service's slices to try
// first: its primary IP family, else IPv4 (the cluster's primary family).
func PreferredAddressType(svc *corev1.Service) discoveryv1.AddressType {
	if svc != nil && len(svc.Spec.IPFamilies) > 0 {
		return discoveryv1.AddressType(svc.Spec.IPFamilies[0])
	}
	return discoveryv1.AddressTypeIPv4
}

// Random picks, from the slices in random order (those of the preferred
// address type first), a random ready endpoint of a slice serving the
// port named portName that valid (if not nil) accepts, and returns its
// host:port. list is reordered. With none, the error is upstream's 503
// "no endpoints available for service".
func Random(svc string, list []*discoveryv1.EndpointSlice, portName string, preferred discoveryv1.AddressType, valid func(*discoveryv1.Endpoint) bool) (string, error) {
	rand.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	slices.SortStableFunc(list, func(a, b *discoveryv1.EndpointSlice) int {
		return rank(a.AddressType == preferred) - rank(b.AddressType == preferred)
	})
	for _, sl := range list {
		for _, p := range sl.Ports {
			if p.Name == nil || *p.Name != portName || p.Port == nil || len(sl.Endpoints) == 0 {
				continue
			}
			offset := rand.IntN(len(sl.Endpoints))
			for i := range sl.Endpoints {
				ep := &sl.Endpoints[(i+offset)%len(sl.Endpoints)]
				if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
					continue
				}
				if valid != nil && !valid(ep) {
					continue
				}
				return net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(*p.Port))), nil
			}
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", svc))
}

func rank(first bool) int {
	if first {
		return 0
	}
	return 1
}
