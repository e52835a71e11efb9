package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"skiff/server/apiendpoints"
	"skiff/server/auth/rbac"
)

// inProcessConfig is a client-go config that talks to the API server in
// this process through rt.
func inProcessConfig(rt http.RoundTripper) *rest.Config {
	return &rest.Config{Host: "http://skiff.internal", Transport: rt, RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
}

// bootstrap makes what every cluster starts with: the system namespaces and
// the default RBAC policy. It runs on every start, creating what is missing
// and bringing auto-updated roles up to date.
// bootstrapAddrs are the addresses the bootstrap objects carry.
type bootstrapAddrs struct {
	serviceIP  net.IP     // default/kubernetes
	serviceNet *net.IPNet // the Service range
	clusterDNS net.IP     // kube-system/kube-dns (nil: none)
	port       int        // the API's port (default/kubernetes targets it)
	endpoints  *apiendpoints.Reconciler
}

func bootstrap(ctx context.Context, rt http.RoundTripper, a bootstrapAddrs, log *slog.Logger) error {
	cs, err := kubernetes.NewForConfig(inProcessConfig(rt))
	if err != nil {
		return err
	}
	for _, name := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	if err := kubernetesService(ctx, cs, a.serviceIP, a.port); err != nil {
		return err
	}
	// The endpoints before anything reads them (agents' load balancers,
	// the proxy); apiendpoints keeps them up to date from here on.
	if err := a.endpoints.Reconcile(ctx); err != nil {
		return err
	}
	switch {
	case a.clusterDNS == nil:
	case !a.serviceNet.Contains(a.clusterDNS):
		log.Warn("the cluster DNS address is outside the Service range: no kube-dns Service", "cluster-dns", a.clusterDNS, "service-cidr", a.serviceNet)
	default:
		// Not fatal: on a cluster where another Service already holds the
		// address (made before kube-dns existed), the server must still
		// start; DNS itself is served by the nodes either way.
		if err := kubeDNSService(ctx, cs, a.clusterDNS); err != nil {
			log.Warn("no kube-dns Service", "err", err)
		}
	}
	if err := bootstrapClusterRoles(ctx, cs); err != nil {
		return err
	}
	for _, b := range rbac.BootstrapClusterRoleBindings() {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clusterrolebinding %s: %w", b.Name, err)
		}
	}
	for _, r := range rbac.BootstrapRoles() {
		if _, err := cs.RbacV1().Roles(r.Namespace).Create(ctx, &r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("role %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	for _, b := range rbac.BootstrapRoleBindings() {
		if _, err := cs.RbacV1().RoleBindings(b.Namespace).Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("rolebinding %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	return nil
}

// kubernetesService is the in-cluster address of the API server:
// default/kubernetes at the first Service IP, port 443.
func kubernetesService(ctx context.Context, cs kubernetes.Interface, ip net.IP, port int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: ip.String(),
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(int32(port))}},
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	cur, err := cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cs.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, svc, metav1.CreateOptions{})
	case err == nil && (len(cur.Spec.Ports) != 1 || cur.Spec.Ports[0].TargetPort != svc.Spec.Ports[0].TargetPort):
		cur.Spec.Ports = svc.Spec.Ports // the API port changed since the last start
		_, err = cs.CoreV1().Services(metav1.NamespaceDefault).Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("service default/kubernetes: %w", err)
	}
	return nil
}

// kubeDNSService is kube-system/kube-dns at the cluster DNS address, as
// every distribution has it: the nodes answer there themselves (the agent
// serves DNS on that address), so the Service has no selector and no
// endpoints, and the node proxy leaves its address alone. It exists so the
// address is reserved against other Services and found where tools look.
func kubeDNSService(ctx context.Context, cs kubernetes.Interface, ip net.IP) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "skiff-dns", "kubernetes.io/cluster-service": "true"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: ip.String(),
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	// Look first: on a restart the address is already allocated to the
	// existing Service, and a create would fail on the allocation (422)
	// before it failed on the name.
	_, err := cs.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, svc.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, svc, metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("service kube-system/kube-dns: %w", err)
	}
	return nil
}

// bootstrapClusterRoles creates the default ClusterRoles with aggregated
// rules filled in (admin, edit and view collect their parts), and updates
// existing ones that are marked for auto-update.
func bootstrapClusterRoles(ctx context.Context, cs kubernetes.Interface) error {
	roles := rbac.BootstrapClusterRoles()
	ptrs := make([]*rbacv1.ClusterRole, len(roles))
	for i := range roles {
		ptrs[i] = &roles[i]
	}
	for changed := true; changed; { // aggregation nests: view → edit → admin
		changed = false
		for _, r := range ptrs {
			if r.AggregationRule == nil {
				continue
			}
			if rules, c := rbac.Aggregate(r, ptrs); c {
				r.Rules, changed = rules, true
			}
		}
	}
	for _, r := range ptrs {
		cur, err := cs.RbacV1().ClusterRoles().Get(ctx, r.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
		case err == nil && cur.Annotations[rbacv1.AutoUpdateAnnotationKey] == "true" &&
			(!reflect.DeepEqual(cur.Rules, r.Rules) || !reflect.DeepEqual(cur.AggregationRule, r.AggregationRule)):
			cur.Rules, cur.AggregationRule = r.Rules, r.AggregationRule
			_, err = cs.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("clusterrole %s: %w", r.Name, err)
		}
	}
	return nil
}
