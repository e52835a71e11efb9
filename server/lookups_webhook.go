package server

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/serviceendpoint"
	"skiff/server/storage"
)

// ResolveService implements webhook.Resolver from the watch cache: a
// random ready endpoint of the Service's EndpointSlices, at the slice port
// named as the Service port numbered port (its resolved targetPort). The
// API server dials pod addresses directly, as upstream does with
// --enable-aggregator-routing, so no Service datapath is needed on this
// host. An ExternalName Service resolves to its name, as upstream routes it.
func (l *objectLookups) ResolveService(ctx context.Context, namespace, name string, port int32) (string, error) {
	svc := get[corev1.Service](l, "", "services", namespace, name)
	if svc == nil {
		// A webhook Service created a moment ago may not have reached
		// the cache yet.
		if err := l.st.Cache().WaitCurrent(ctx); err != nil {
			return "", err
		}
		svc = get[corev1.Service](l, "", "services", namespace, name)
	}
	if svc == nil {
		return "", apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil
	}
	sp, err := serviceendpoint.PortByNumber(svc, port)
	if err != nil {
		return "", err
	}
	res := l.resource("discovery.k8s.io", "endpointslices")
	if res == nil {
		return "", apierrors.NewInternalError(fmt.Errorf("endpointslices are not registered"))
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	entries, _, err := l.st.Cache().List(res, storage.Predicate{Namespace: namespace, Label: sel})
	if err != nil {
		return "", err
	}
	list := make([]*discoveryv1.EndpointSlice, 0, len(entries))
	for _, e := range entries {
		if sl, ok := e.Obj.(*discoveryv1.EndpointSlice); ok {
			list = append(list, sl)
		}
	}
	// Unlike services/proxy, endpoints need not be pods: a webhook may be
	// a selector-less Service whose slices point outside the cluster.
	return serviceendpoint.Random(name, list, sp.Name, serviceendpoint.PreferredAddressType(svc), nil)
}
