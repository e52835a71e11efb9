package apiendpoints

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// desiredSubsets is the Endpoints' content for servers (sorted): one
// subset per port, ports ascending.
func desiredSubsets(servers []server) []corev1.EndpointSubset {
	byPort := map[int32][]corev1.EndpointAddress{}
	var ports []int32
	for _, s := range servers {
		if _, ok := byPort[s.port]; !ok {
			ports = append(ports, s.port)
		}
		byPort[s.port] = append(byPort[s.port], corev1.EndpointAddress{IP: s.addr.String()})
	}
	slices.Sort(ports)
	out := make([]corev1.EndpointSubset, 0, len(ports))
	for _, p := range ports {
		out = append(out, corev1.EndpointSubset{
			Addresses: byPort[p],
			Ports:     []corev1.EndpointPort{{Name: portName, Port: p, Protocol: corev1.ProtocolTCP}},
		})
	}
	return out
}

// desiredSlices is the EndpointSlices for servers (sorted): one per
// (family, port) group, the first named "kubernetes".
func desiredSlices(servers []server) []*discoveryv1.EndpointSlice {
	type group struct {
		v4   bool
		port int32
	}
	byGroup := map[group][]discoveryv1.Endpoint{}
	var groups []group
	for _, s := range servers {
		g := group{s.addr.Is4(), s.port}
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], discoveryv1.Endpoint{Addresses: []string{s.addr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	slices.SortFunc(groups, func(a, b group) int {
		if a.v4 != b.v4 {
			if a.v4 {
				return -1
			}
			return 1
		}
		return int(a.port) - int(b.port)
	})
	out := make([]*discoveryv1.EndpointSlice, 0, len(groups))
	for i, g := range groups {
		family, fam := discoveryv1.AddressTypeIPv4, "ipv4"
		if !g.v4 {
			family, fam = discoveryv1.AddressTypeIPv6, "ipv6"
		}
		name := serviceName
		if i > 0 {
			name = serviceName + "-" + fam + "-" + strconv.Itoa(int(g.port))
		}
		out = append(out, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault,
				Labels: map[string]string{discoveryv1.LabelServiceName: serviceName, discoveryv1.LabelManagedBy: sliceManager}},
			AddressType: family,
			Endpoints:   byGroup[g],
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(g.port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		})
	}
	return out
}

// write brings the Endpoints and EndpointSlices to servers.
func (r *Reconciler) write(ctx context.Context, servers []server) error {
	if err := r.writeEndpoints(ctx, desiredSubsets(servers)); err != nil {
		return fmt.Errorf("apiendpoints: endpoints %s/%s: %w", metav1.NamespaceDefault, serviceName, err)
	}
	want := desiredSlices(servers)
	keep := map[string]bool{}
	for _, s := range want {
		keep[s.Name] = true
		if err := r.writeSlice(ctx, s); err != nil {
			return fmt.Errorf("apiendpoints: endpointslice %s/%s: %w", metav1.NamespaceDefault, s.Name, err)
		}
	}
	// Slices of groups no server is in any more.
	api := r.cfg.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: serviceName, discoveryv1.LabelManagedBy: sliceManager})
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("apiendpoints: listing the kubernetes endpointslices: %w", err)
	}
	for _, s := range list.Items {
		if keep[s.Name] || s.Name == serviceName {
			continue
		}
		if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("apiendpoints: deleting endpointslice %s/%s: %w", metav1.NamespaceDefault, s.Name, err)
		}
	}
	return nil
}

func (r *Reconciler) writeEndpoints(ctx context.Context, subsets []corev1.EndpointSubset) error {
	api := r.cfg.Client.CoreV1().Endpoints(metav1.NamespaceDefault)
	return retryWrite(func() error {
		cur, err := api.Get(ctx, serviceName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = api.Create(ctx, &corev1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Name: serviceName, Namespace: metav1.NamespaceDefault,
					// Nothing mirrors these into slices: they are written here.
					Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
				Subsets: subsets,
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(cur.Subsets, subsets) && cur.Labels[discoveryv1.LabelSkipMirror] == "true" {
			return nil
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[discoveryv1.LabelSkipMirror] = "true"
		cur.Subsets = subsets
		r.log.Info("kubernetes endpoints changed", "subsets", len(subsets))
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (r *Reconciler) writeSlice(ctx context.Context, want *discoveryv1.EndpointSlice) error {
	api := r.cfg.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	return retryWrite(func() error {
		cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, want, metav1.CreateOptions{})
			return err
		case err != nil:
			return err
		case cur.AddressType != want.AddressType:
			// The address type is immutable: replace the slice.
			pre := metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}
			if err := api.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &pre}); err != nil {
				return err
			}
			_, err = api.Create(ctx, want, metav1.CreateOptions{})
			return err
		}
		if equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(cur.Ports, want.Ports) &&
			cur.Labels[discoveryv1.LabelServiceName] == serviceName && cur.Labels[discoveryv1.LabelManagedBy] == sliceManager {
			return nil
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			cur.Labels[k] = v
		}
		cur.Endpoints, cur.Ports = want.Endpoints, want.Ports
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}
