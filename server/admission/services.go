package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/apiserver"
	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/store"
)

// ServiceAllocator gives Services their cluster IP and node ports. Each
// allocation is created in the state store with compare-and-swap, so two
// API servers (or two racing requests) can never hand out the same address
// or port: the store decides who got it. An address is an IPAddress
// object (serviceips.go), a node port a bare key.
type ServiceAllocator struct {
	Store store.Store
	// Objects and Registry reach the IPAddress and ServiceCIDR objects.
	Objects  *storage.Storage
	Registry *registry.Registry
	// CIDR is the Service address range of --service-cidr (10.43.0.0/16);
	// ServiceCIDR objects add more.
	CIDR *net.IPNet
	// NodePortMin and NodePortMax bound node ports (30000-32767).
	NodePortMin, NodePortMax int
	Log                      *slog.Logger
}

const portPrefix = "/allocations/nodeports/"

// Admit implements apiserver.Admitter.
func (p *ServiceAllocator) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	svc, ok := a.Object.(*corev1.Service)
	if !ok || a.Subresource != "" {
		return nil
	}
	old, _ := a.Old.(*corev1.Service)
	dropTypeDependentFields(svc, old)
	if a.DryRun && a.Op == apiserver.OpUpdate {
		return nil
	}
	owner := string(svc.UID)
	if err := p.clusterIP(ctx, svc, old, a.DryRun); err != nil {
		return err
	}
	if err := p.nodePorts(ctx, svc, old, owner, a.DryRun); err != nil {
		return err
	}
	return p.healthCheckNodePort(ctx, svc, old, owner, a.DryRun)
}

// needsHealthCheck: a LoadBalancer that keeps traffic on nodes with local
// endpoints gets a node port on which load balancers probe each node.
func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func (p *ServiceAllocator) healthCheckNodePort(ctx context.Context, svc, old *corev1.Service, owner string, dry bool) error {
	if !needsHealthCheck(svc) {
		svc.Spec.HealthCheckNodePort = 0
		return nil
	}
	if svc.Spec.HealthCheckNodePort == 0 && old != nil && needsHealthCheck(old) {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
	if hc := svc.Spec.HealthCheckNodePort; hc != 0 {
		if old != nil && hc == old.Spec.HealthCheckNodePort {
			return nil
		}
		if err := p.claim(ctx, portPrefix+strconv.Itoa(int(hc)), owner, dry); err != nil {
			return invalid(svc, field.Invalid(field.NewPath("spec", "healthCheckNodePort"), hc, "provided port is already allocated"))
		}
		return nil
	}
	port, err := p.allocatePort(ctx, owner, dry)
	if err != nil {
		return err
	}
	svc.Spec.HealthCheckNodePort = int32(port)
	return nil
}

func (p *ServiceAllocator) clusterIP(ctx context.Context, svc, old *corev1.Service, dry bool) error {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil // validation refuses any address left here
	}
	if old != nil && old.Spec.Type == corev1.ServiceTypeExternalName {
		old = nil // it held nothing: leaving ExternalName allocates afresh
	}
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) > 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0] // only the plural given; [""] asks for one
	}
	if old != nil && old.Spec.ClusterIP != "" && svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIP = old.Spec.ClusterIP // kubectl apply drops it; it stays
	}
	ranges := p.ranges()
	switch ip := svc.Spec.ClusterIP; {
	case ip == corev1.ClusterIPNone:
	case old != nil && ip == old.Spec.ClusterIP:
	case ip != "":
		parsed := net.ParseIP(ip)
		path := field.NewPath("spec", "clusterIPs").Index(0)
		if parsed == nil {
			return invalid(svc, field.Invalid(path, ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
		}
		if _, err := rangeOf(ranges, parsed); err != nil {
			return invalid(svc, field.Invalid(path, ip, fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ip, ip, describeRanges(ranges))))
		}
		if err := p.claimIP(ctx, parsed, svc, dry); errors.Is(err, store.ErrExists) {
			return invalid(svc, field.Invalid(path, ip, fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", ip)))
		} else if err != nil {
			return apierrors.NewInternalError(err)
		}
	default:
		ip, err := p.allocateIP(ctx, svc, ranges, dry)
		if err != nil {
			return err
		}
		svc.Spec.ClusterIP = ip
	}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	family := corev1.IPv4Protocol
	if ip := net.ParseIP(svc.Spec.ClusterIP); ip != nil {
		family = ipFamily(ip)
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone && len(svc.Spec.Selector) == 0 && svc.Spec.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicyRequireDualStack // upstream's choice for headless without selector
		svc.Spec.IPFamilyPolicy = &policy
	}
	if len(svc.Spec.IPFamilies) == 0 {
		svc.Spec.IPFamilies = []corev1.IPFamily{family}
	}
	if svc.Spec.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicySingleStack
		svc.Spec.IPFamilyPolicy = &policy
	}
	return nil
}

func invalid(svc *corev1.Service, errs ...*field.Error) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
}

// claim creates a node port key; it fails if someone holds it. A dry run
// only checks.
func (p *ServiceAllocator) claim(ctx context.Context, key, owner string, dry bool) error {
	if dry {
		if _, err := p.Store.Get(ctx, key); err == nil {
			return store.ErrExists
		}
		return nil
	}
	_, err := p.Store.Create(ctx, key, []byte(owner))
	return err
}

// allocateIP picks a free address of the Service's family from the first
// range that has one: random probes first (cheap while the range is
// sparse), then a scan, so a nearly full range still finds a hole.
func (p *ServiceAllocator) allocateIP(ctx context.Context, svc *corev1.Service, ranges []*net.IPNet, dry bool) (string, error) {
	want := corev1.IPv4Protocol
	if len(svc.Spec.IPFamilies) > 0 {
		want = svc.Spec.IPFamilies[0]
	}
	for _, n := range ranges {
		if ipFamily(n.IP) != want {
			continue
		}
		ip, err := p.allocateIPIn(ctx, svc, n, dry)
		if !errors.Is(err, errRangeFull) {
			return ip, err
		}
	}
	return "", apierrors.NewInternalError(errors.New("failed to allocate a serviceIP: range is full"))
}

var errRangeFull = errors.New("range is full")

func (p *ServiceAllocator) allocateIPIn(ctx context.Context, svc *corev1.Service, n *net.IPNet, dry bool) (string, error) {
	size := rangeSize(n)
	if size < 4 {
		return "", errRangeFull
	}
	try := func(off int64) (string, bool, error) {
		ip := offsetIP(n, off)
		err := p.claimIP(ctx, ip, svc, dry)
		if errors.Is(err, store.ErrExists) {
			return "", false, nil
		}
		if err != nil {
			return "", false, apierrors.NewInternalError(err)
		}
		return ip.String(), true, nil
	}
	// Offset 0 is the network address, 1 the API server's own Service,
	// size-1 the broadcast address.
	for i := 0; i < 64; i++ {
		if ip, ok, err := try(2 + rand.Int64N(size-3)); ok || err != nil {
			return ip, err
		}
	}
	for off := int64(2); off < size-1; off++ {
		if ip, ok, err := try(off); ok || err != nil {
			return ip, err
		}
	}
	return "", errRangeFull
}

func rangeSize(n *net.IPNet) int64 {
	ones, bits := n.Mask.Size()
	if bits-ones > 62 {
		return 1 << 62
	}
	return 1 << (bits - ones)
}

func offsetIP(n *net.IPNet, off int64) net.IP {
	base := new(big.Int).SetBytes(n.IP.To16())
	ip := new(big.Int).Add(base, big.NewInt(off)).Bytes()
	out := make(net.IP, 16)
	copy(out[16-len(ip):], ip)
	if v4 := n.IP.To4(); v4 != nil {
		return out.To4()
	}
	return out
}

func needsNodePorts(t corev1.ServiceType) bool {
	return t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer
}

func (p *ServiceAllocator) nodePorts(ctx context.Context, svc, old *corev1.Service, owner string, dry bool) error {
	if !needsNodePorts(svc.Spec.Type) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
		return nil
	}
	held := map[int32]bool{}
	if old != nil && needsNodePorts(old.Spec.Type) {
		for _, port := range old.Spec.Ports {
			held[port.NodePort] = true
		}
	}
	for i := range svc.Spec.Ports {
		port := &svc.Spec.Ports[i]
		if port.NodePort == 0 && old != nil {
			port.NodePort = matchingNodePort(old, port)
		}
		switch {
		case port.NodePort != 0 && held[port.NodePort]:
		case port.NodePort != 0:
			np := int(port.NodePort)
			path := field.NewPath("spec", "ports").Index(i).Child("nodePort")
			if np < p.NodePortMin || np > p.NodePortMax {
				return invalid(svc, field.Invalid(path, np, fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", p.NodePortMin, p.NodePortMax)))
			}
			if err := p.claim(ctx, portPrefix+strconv.Itoa(np), owner, dry); err != nil {
				return invalid(svc, field.Invalid(path, np, "provided port is already allocated"))
			}
		default:
			np, err := p.allocatePort(ctx, owner, dry)
			if err != nil {
				return err
			}
			port.NodePort = int32(np)
		}
		held[port.NodePort] = true
	}
	return nil
}

// matchingNodePort keeps the node port a port already had when an update
// (kubectl apply) leaves it out.
func matchingNodePort(old *corev1.Service, port *corev1.ServicePort) int32 {
	for _, op := range old.Spec.Ports {
		if op.Port == port.Port && op.Protocol == port.Protocol && needsNodePorts(old.Spec.Type) {
			return op.NodePort
		}
	}
	return 0
}

func (p *ServiceAllocator) allocatePort(ctx context.Context, owner string, dry bool) (int, error) {
	n := p.NodePortMax - p.NodePortMin + 1
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		port := p.NodePortMin + (start+i)%n
		err := p.claim(ctx, portPrefix+strconv.Itoa(port), owner, dry)
		if err == nil {
			return port, nil
		}
		if !errors.Is(err, store.ErrExists) {
			return 0, apierrors.NewInternalError(err)
		}
	}
	return 0, apierrors.NewInternalError(errors.New("failed to allocate a nodePort: range is full"))
}

// Release implements apiserver.Releaser: the addresses and ports obj holds
// that keep does not go back to the pool.
func (p *ServiceAllocator) Release(ctx context.Context, res *registry.Resource, obj, keep runtime.Object) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	kept, _ := keep.(*corev1.Service)
	if ip := serviceIP(svc); ip != "" && (kept == nil || serviceIP(kept) != ip) {
		p.freeIP(ctx, ip, svc)
	}
	for _, key := range allocationKeys(svc) {
		if kept != nil && contains(allocationKeys(kept), key) {
			continue
		}
		p.free(ctx, key, string(svc.UID))
	}
}

// allocationKeys are the node port keys a Service holds.
func allocationKeys(svc *corev1.Service) []string {
	var keys []string
	if needsNodePorts(svc.Spec.Type) {
		for _, port := range svc.Spec.Ports {
			if port.NodePort != 0 {
				keys = append(keys, portPrefix+strconv.Itoa(int(port.NodePort)))
			}
		}
	}
	if needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort != 0 {
		keys = append(keys, portPrefix+strconv.Itoa(int(svc.Spec.HealthCheckNodePort)))
	}
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// free deletes an allocation key if owner still holds it.
func (p *ServiceAllocator) free(ctx context.Context, key, owner string) {
	kv, err := p.Store.Get(ctx, key)
	if err != nil || string(kv.Value) != owner {
		return
	}
	if _, _, err := p.Store.Delete(ctx, key, kv.ModRevision); err != nil && p.Log != nil {
		p.Log.Warn("releasing a service allocation", "key", key, "err", err)
	}
}

// ServiceLister lists every Service, for Repair.
type ServiceLister interface {
	// Services returns every Service in the cluster.
	Services(ctx context.Context) ([]*corev1.Service, error)
}

// Repair frees allocations no Service holds (left behind by a crash between
// allocating and storing) and records Service addresses that lost their
// IPAddress until ctx ends, as upstream's repair controllers do. An allocation is freed only when it was already orphaned, unchanged,
// one interval earlier: its Service may be on its way to the store.
func (p *ServiceAllocator) Repair(ctx context.Context, services ServiceLister, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	suspects := map[string]int64{} // key -> revision when first seen orphaned
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, err := p.repairOnce(ctx, services, suspects)
		if err != nil {
			if ctx.Err() == nil && p.Log != nil {
				p.Log.Warn("service allocation repair", "err", err)
			}
			continue
		}
		suspects = next
	}
}

// repairOnce frees the suspects still orphaned and returns this round's.
func (p *ServiceAllocator) repairOnce(ctx context.Context, services ServiceLister, suspects map[string]int64) (map[string]int64, error) {
	svcs, err := services.Services(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, s := range svcs {
		for _, k := range allocationKeys(s) {
			used[k] = true
		}
	}
	next, err := p.repairIPs(ctx, svcs, suspects)
	if err != nil {
		return nil, err
	}
	list, err := p.Store.List(ctx, store.ListOptions{Prefix: portPrefix})
	if err != nil {
		return nil, err
	}
	for _, kv := range list.Items {
		if used[kv.Key] {
			continue
		}
		if rev, ok := suspects[kv.Key]; ok && rev == kv.ModRevision {
			p.Store.Delete(ctx, kv.Key, kv.ModRevision)
			continue
		}
		next[kv.Key] = kv.ModRevision
	}
	return next, nil
}
