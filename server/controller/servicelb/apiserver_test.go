package servicelb

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

type cluster struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ce := controllertest.Start(t, controllertest.Options{Namespaces: []string{"default"}, Timeout: 50 * time.Second})
	cfg := Config{Client: ce.Client, Informers: ce.Informers, Logger: controllertest.Logger(t, slog.LevelWarn)}
	controllertest.Run(t, ce.Ctx, func(ctx context.Context) error { return Run(ctx, cfg) })
	return &cluster{t: t, ctx: ce.Ctx, client: ce.Client}
}

// node registers a node and reports its status, as its kubelet would.
func (c *cluster) node(name string, ready bool, addrs ...corev1.NodeAddress) {
	c.t.Helper()
	n, err := c.client.CoreV1().Nodes().Create(c.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	n.Status.Addresses = addrs
	c.setNodeReady(n, ready)
}

func (c *cluster) setNodeReady(n *corev1.Node, ready bool) {
	c.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(c.ctx, n, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) getNode(name string) *corev1.Node {
	c.t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *cluster) ingress(name string) []string {
	c.t.Helper()
	svc, err := c.client.CoreV1().Services("default").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return ingressIPs(svc.Status.LoadBalancer.Ingress)
}

func (c *cluster) eventuallyIngress(svc string, want ...string) {
	c.t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = c.ingress(svc)
		return fmt.Sprint(got) == fmt.Sprint(ingressIPsOf(want)), nil
	})
	if err != nil {
		c.t.Fatalf("ingress of %s = %v, want %v", svc, got, want)
	}
}

func ip(t corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: t, Address: a}
}

func TestServiceLB_StatusFollowsNodeReadiness(t *testing.T) {
	c := startCluster(t)
	c.node("node-a", true, ip(corev1.NodeInternalIP, "10.0.0.11"))
	c.node("node-b", true, ip(corev1.NodeInternalIP, "10.0.0.12"))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.43.0.30", Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}},
	}
	if _, err := c.client.CoreV1().Services("default").Create(c.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventuallyIngress("web", "10.0.0.11", "10.0.0.12")
	got, err := c.client.CoreV1().Services("default").Get(c.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Status.LoadBalancer.Ingress[0].IPMode; m == nil || *m != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode = %v, want VIP", m)
	}

	c.setNodeReady(c.getNode("node-b"), false)
	c.eventuallyIngress("web", "10.0.0.11")
	c.node("node-c", true, ip(corev1.NodeInternalIP, "10.0.0.13"))
	c.eventuallyIngress("web", "10.0.0.11", "10.0.0.13")
	if err := c.client.CoreV1().Nodes().Delete(c.ctx, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventuallyIngress("web", "10.0.0.13")

	err = wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		evs, err := c.client.CoreV1().Events("default").List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "UpdatedLoadBalancer" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no UpdatedLoadBalancer event: %v", err)
	}

	// No longer a load balancer: the ingress goes.
	got, err = c.client.CoreV1().Services("default").Get(c.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Type = corev1.ServiceTypeClusterIP
	got.Spec.AllocateLoadBalancerNodePorts, got.Spec.ExternalTrafficPolicy = nil, ""
	got.Spec.Ports[0].NodePort = 0
	if _, err := c.client.CoreV1().Services("default").Update(c.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventuallyIngress("web")
}

func TestServiceLB_ExternalAddressesAndClassedServices(t *testing.T) {
	c := startCluster(t)
	c.node("node-a", true, ip(corev1.NodeInternalIP, "10.0.0.11"), ip(corev1.NodeExternalIP, "203.0.113.11"))
	c.node("node-b", true, ip(corev1.NodeInternalIP, "10.0.0.12"))
	mk := func(name string, class *string) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class, Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if _, err := c.client.CoreV1().Services("default").Create(c.ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("classed", new("example.com/other-lb"))
	mk("web", nil)
	c.eventuallyIngress("web", "203.0.113.11")
	if got := c.ingress("classed"); len(got) != 0 {
		t.Errorf("service with a loadBalancerClass got ingress %v", got)
	}
}
