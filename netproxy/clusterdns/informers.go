package clusterdns

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// watch registers the Service and EndpointSlice handlers that keep x
// current, and returns what tells when their first lists are indexed.
func (x *index) watch(f informers.SharedInformerFactory) ([]cache.InformerSynced, error) {
	svcReg, err := f.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    x.onService,
		UpdateFunc: func(_, obj any) { x.onService(obj) },
		DeleteFunc: func(obj any) { x.onServiceDelete(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch services: %w", err)
	}
	sliceReg, err := f.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    x.onSlice,
		UpdateFunc: func(_, obj any) { x.onSlice(obj) },
		DeleteFunc: func(obj any) { x.onSliceDelete(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch endpointslices: %w", err)
	}
	return []cache.InformerSynced{svcReg.HasSynced, sliceReg.HasSynced}, nil
}

func (x *index) onService(obj any) {
	if svc, ok := obj.(*corev1.Service); ok {
		x.setService(svcKey{svc.Namespace, svc.Name}, serviceInfoOf(svc))
	}
}

func (x *index) onServiceDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if svc, ok := obj.(*corev1.Service); ok {
		x.setService(svcKey{svc.Namespace, svc.Name}, nil)
	}
}

func (x *index) onSlice(obj any) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		x.setSlice(svcKey{s.Namespace, s.Name}, s.Labels[discoveryv1.LabelServiceName], sliceInfoOf(s))
	}
}

func (x *index) onSliceDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		x.setSlice(svcKey{s.Namespace, s.Name}, s.Labels[discoveryv1.LabelServiceName], nil)
	}
}

func serviceInfoOf(svc *corev1.Service) *serviceInfo {
	info := &serviceInfo{publishNotReady: svc.Spec.PublishNotReadyAddresses}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		info.kind = kindExternalName
		info.externalName = dns.Fqdn(strings.ToLower(svc.Spec.ExternalName))
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		info.kind = kindHeadless
	default:
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, s := range ips {
			if a, err := netip.ParseAddr(s); err == nil {
				info.clusterIPs = append(info.clusterIPs, a.Unmap())
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "" {
			continue // no SRV name without a port name
		}
		info.ports = append(info.ports, portInfo{
			name:  strings.ToLower(p.Name),
			proto: protoLabel(p.Protocol),
			port:  uint16(p.Port),
		})
	}
	return info
}

func sliceInfoOf(s *discoveryv1.EndpointSlice) *sliceInfo {
	info := &sliceInfo{}
	if s.AddressType == discoveryv1.AddressTypeFQDN {
		return info
	}
	for _, p := range s.Ports {
		if p.Name == nil || *p.Name == "" || p.Port == nil {
			continue
		}
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		info.ports = append(info.ports, portInfo{
			name:  strings.ToLower(*p.Name),
			proto: protoLabel(proto),
			port:  uint16(*p.Port),
		})
	}
	for _, ep := range s.Endpoints {
		e := endpointInfo{
			// Unknown readiness counts as ready, as the API documents.
			ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready,
		}
		if ep.Hostname != nil {
			e.hostname = *ep.Hostname
		}
		for _, s := range ep.Addresses {
			if a, err := netip.ParseAddr(s); err == nil {
				e.addrs = append(e.addrs, a.Unmap())
			}
		}
		info.endpoints = append(info.endpoints, e)
	}
	return info
}

func protoLabel(p corev1.Protocol) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(string(p))
}
