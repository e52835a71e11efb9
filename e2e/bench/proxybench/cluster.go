package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	benchNS   = "default"
	nodeName  = "proxybench"
	targetIP  = "10.96.0.10"
	portName  = "http"
	svcPort   = 80
	dnsDomain = "cluster.local"
)

// The fake clientset's watchers hold 100 events and panic when full, so
// writes wait for the informers to catch up after every batch of this many.
const writeBatch = 25

// cluster is the fake API: svc-0 is the target (10.96.0.10:80 → the echo
// pod), svc-1… are the others, each with one EndpointSlice of made-up pod
// addresses.
type cluster struct {
	cs                  *fake.Clientset
	services, endpoints int
	slices              map[int]*discoveryv1.EndpointSlice // as last written
}

func newCluster(services, endpoints int) *cluster {
	return &cluster{cs: fake.NewSimpleClientset(), services: services, endpoints: endpoints,
		slices: map[int]*discoveryv1.EndpointSlice{}}
}

func addIP(base string, off int) net.IP {
	b := net.ParseIP(base).To4()
	n := binary.BigEndian.Uint32(b) + uint32(off)
	return binary.BigEndian.AppendUint32(nil, n)
}

func svcName(i int) string { return fmt.Sprintf("svc-%d", i) }

// clusterIP of svc-i: the others start at 10.96.1.1, clear of the target.
func clusterIP(i int) net.IP {
	if i == 0 {
		return net.ParseIP(targetIP).To4()
	}
	return addIP("10.96.1.0", i)
}

func service(i int) *v1.Service {
	ip := clusterIP(i).String()
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName(i), Namespace: benchNS},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  ip,
			ClusterIPs: []string{ip},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Selector:   map[string]string{"app": svcName(i)},
			Ports: []v1.ServicePort{{Name: portName, Protocol: v1.ProtocolTCP, Port: svcPort,
				TargetPort: intstr.FromInt32(echoPort)}},
		},
	}
}

// endpointSlice of svc-i with n ready endpoints: the echo pod for the
// target, made-up addresses in 10.245.0.0/13 (never contacted) for the rest.
func (c *cluster) endpointSlice(i, n int) *discoveryv1.EndpointSlice {
	yes, no := true, false
	port, proto, name := int32(echoPort), v1.ProtocolTCP, portName
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svcName(i) + "-x1", Namespace: benchNS,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName(i),
				discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for j := range n {
		addr := podIP
		node := nodeName
		if i > 0 {
			addr = addIP("10.245.0.0", 1+(i-1)*c.endpoints+j).String()
			node = fmt.Sprintf("node-%d", j)
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
			NodeName:   &node,
		})
	}
	return s
}

// seed writes every Service and slice before any informer exists (no
// watcher to overflow).
func (c *cluster) seed(ctx context.Context) error {
	for i := range c.services {
		if err := c.createOne(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) createOne(ctx context.Context, i int) error {
	if _, err := c.cs.CoreV1().Services(benchNS).Create(ctx, service(i), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service %d: %w", i, err)
	}
	n := c.endpoints
	if i == 0 {
		n = 1
	}
	s, err := c.cs.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, c.endpointSlice(i, n), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create slice %d: %w", i, err)
	}
	c.slices[i] = s
	return nil
}

func (c *cluster) deleteOne(ctx context.Context, i int) error {
	if err := c.cs.DiscoveryV1().EndpointSlices(benchNS).Delete(ctx, c.slices[i].Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete slice %d: %w", i, err)
	}
	delete(c.slices, i)
	if err := c.cs.CoreV1().Services(benchNS).Delete(ctx, svcName(i), metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete service %d: %w", i, err)
	}
	return nil
}

// setOthers creates (present) or deletes every Service but the target,
// pausing after each batch until f's informers have seen the batch's last
// writes.
func (c *cluster) setOthers(ctx context.Context, f informers.SharedInformerFactory, present bool) error {
	svcs := f.Core().V1().Services().Informer().GetStore()
	slices := f.Discovery().V1().EndpointSlices().Informer().GetStore()
	for i := 1; i < c.services; i++ {
		var err error
		if present {
			err = c.createOne(ctx, i)
		} else {
			err = c.deleteOne(ctx, i)
		}
		if err != nil {
			return err
		}
		if i%writeBatch == 0 || i == c.services-1 {
			key := benchNS + "/" + svcName(i)
			skey := key + "-x1"
			if err := waitStores(ctx, func() bool {
				_, ok1, _ := svcs.GetByKey(key)
				_, ok2, _ := slices.GetByKey(skey)
				return ok1 == present && ok2 == present
			}); err != nil {
				return fmt.Errorf("informers did not catch up with svc-%d: %w", i, err)
			}
		}
	}
	return nil
}

// updateSlice replaces svc-i's endpoints by the first n of its own.
func (c *cluster) updateSlice(ctx context.Context, i, n int) error {
	s := c.slices[i].DeepCopy()
	s.Endpoints = c.endpointSlice(i, n).Endpoints
	got, err := c.cs.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update slice %d: %w", i, err)
	}
	c.slices[i] = got
	return nil
}

func waitStores(ctx context.Context, done func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within 30s")
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
