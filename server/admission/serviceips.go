package admission

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"skiff/server/registry"
	"skiff/server/storage"
	"skiff/store"
)

// Every Service address is held by an IPAddress object named after it, as
// upstream's allocator does: creating the object is the compare-and-swap
// that decides who gets an address, anyone can see what is taken (kubectl
// get ipaddresses), and an address someone reserved by hand is never
// handed out.
const (
	// ManagedByAllocator is the managed-by label value of the IPAddresses
	// the allocator made; only those does it ever free.
	ManagedByAllocator = "ipallocator.k8s.io"
	// DefaultServiceCIDR is the name of the ServiceCIDR of --service-cidr.
	DefaultServiceCIDR = "kubernetes"
	// ServiceCIDRFinalizer keeps a ServiceCIDR whose addresses are in use.
	ServiceCIDRFinalizer = "networking.k8s.io/service-cidr-finalizer"
	// ownerUIDAnnotation records which Service (by UID) an address is for:
	// the parent reference names a Service, but a Service of the same name
	// may be a failed create's or a recreated one's, and must not free it.
	ownerUIDAnnotation = "ipaddress.skiff.io/service-uid"
	// legacyIPPrefix is where addresses were held before IPAddress objects.
	legacyIPPrefix = "/allocations/serviceips/"
)

var errNoRange = errors.New("no Service range holds the address")

func (p *ServiceAllocator) resource(name string) (*registry.Resource, error) {
	if p.Objects == nil || p.Registry == nil {
		return nil, apierrors.NewInternalError(errors.New("service allocator: Objects and Registry are required"))
	}
	res, ok := p.Registry.Lookup(networkingv1.GroupName, "v1", name)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("service allocator: %s not served", name))
	}
	return res, nil
}

// ipFamily is the IPAddress family label value of an address.
func ipFamily(ip net.IP) corev1.IPFamily {
	if ip.To4() != nil {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

func serviceRef(svc *corev1.Service) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Group: "", Resource: "services", Namespace: svc.Namespace, Name: svc.Name}
}

func newIPAddress(ip net.IP, svc *corev1.Service) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:              ip.String(),
			UID:               uuid.NewUUID(),
			CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second)),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(ipFamily(ip)),
				networkingv1.LabelManagedBy:       ManagedByAllocator,
			},
			Annotations: map[string]string{ownerUIDAnnotation: string(svc.UID)},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: serviceRef(svc)},
	}
}

// claimIP records ip as svc's; store.ErrExists when it is taken. A dry run
// only checks.
func (p *ServiceAllocator) claimIP(ctx context.Context, ip net.IP, svc *corev1.Service, dry bool) error {
	res, err := p.resource("ipaddresses")
	if err != nil {
		return err
	}
	if dry {
		if _, err := p.Objects.Get(ctx, res, "", ip.String()); err == nil {
			return store.ErrExists
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	_, err = p.Objects.Create(ctx, res, newIPAddress(ip, svc))
	if apierrors.IsAlreadyExists(err) {
		return store.ErrExists
	}
	return err
}

// heldBy reports whether the allocator made rec for svc.
func heldBy(rec *networkingv1.IPAddress, svc *corev1.Service) bool {
	ref := rec.Spec.ParentRef
	if rec.Labels[networkingv1.LabelManagedBy] != ManagedByAllocator || ref == nil ||
		ref.Group != "" || ref.Resource != "services" || ref.Namespace != svc.Namespace || ref.Name != svc.Name {
		return false
	}
	uid, ok := rec.Annotations[ownerUIDAnnotation]
	return !ok || uid == string(svc.UID)
}

// freeIP deletes the IPAddress of ip if svc still holds it.
func (p *ServiceAllocator) freeIP(ctx context.Context, ip string, svc *corev1.Service) {
	res, err := p.resource("ipaddresses")
	if err != nil {
		return
	}
	e, err := p.Objects.Get(ctx, res, "", ip)
	if err != nil {
		return
	}
	rec, ok := e.Obj.(*networkingv1.IPAddress)
	if !ok || !heldBy(rec, svc) {
		return
	}
	if _, err := p.Objects.Delete(ctx, res, "", ip, e.Rev); err != nil && !apierrors.IsNotFound(err) && p.Log != nil {
		p.Log.Warn("releasing a service address", "ip", ip, "err", err)
	}
}

// serviceIP is the canonical address a Service holds ("" for none).
func serviceIP(svc *corev1.Service) string {
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return ""
	}
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if ip == nil {
		return ""
	}
	return ip.String()
}

// ranges are the Service ranges addresses may come from: --service-cidr
// first, then every ServiceCIDR that is ready and not being deleted. The
// configured range counts even before its ServiceCIDR exists (the server
// makes it at start), but not once that object is being deleted.
func (p *ServiceAllocator) ranges() []*net.IPNet {
	var out []*net.IPNet
	seen := map[string]bool{}
	add := func(n *net.IPNet) {
		if n != nil && !seen[n.String()] {
			seen[n.String()] = true
			out = append(out, n)
		}
	}
	cidrs := p.serviceCIDRs()
	defaultDeleting := false
	for _, c := range cidrs {
		if c.Name == DefaultServiceCIDR && c.DeletionTimestamp != nil {
			defaultDeleting = true
		}
	}
	if !defaultDeleting {
		add(p.CIDR)
	}
	for _, c := range cidrs {
		if c.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
			continue
		}
		for _, s := range c.Spec.CIDRs {
			if _, n, err := net.ParseCIDR(s); err == nil {
				add(n)
			}
		}
	}
	return out
}

// serviceCIDRs are the ServiceCIDRs the watch cache holds, by name.
func (p *ServiceAllocator) serviceCIDRs() []*networkingv1.ServiceCIDR {
	res, err := p.resource("servicecidrs")
	if err != nil {
		return nil
	}
	entries, _, err := p.Objects.Cache().List(res, storage.Predicate{})
	if err != nil {
		return nil
	}
	out := make([]*networkingv1.ServiceCIDR, 0, len(entries))
	for _, e := range entries {
		if c, ok := e.Obj.(*networkingv1.ServiceCIDR); ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// rangeOf is the first usable range that holds ip.
func rangeOf(ranges []*net.IPNet, ip net.IP) (*net.IPNet, error) {
	for _, n := range ranges {
		if n.Contains(ip) {
			return n, nil
		}
	}
	return nil, errNoRange
}

func describeRanges(ranges []*net.IPNet) string {
	s := make([]string, len(ranges))
	for i, n := range ranges {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

// Prepare makes the allocator's records agree with the store before the
// API serves: the default ServiceCIDR exists, every Service's address has
// its IPAddress (a data dir from before IPAddress objects, or a record
// lost to a crash), and the old allocation keys are gone. It runs once at
// start; Repair keeps things in order afterwards.
func (p *ServiceAllocator) Prepare(ctx context.Context, services ServiceLister) error {
	if p.Objects == nil {
		return errors.New("service allocator: Objects is required")
	}
	if err := p.Objects.Cache().WaitCurrent(ctx); err != nil {
		return fmt.Errorf("watch cache: %w", err)
	}
	if err := p.ensureDefaultServiceCIDR(ctx); err != nil {
		return fmt.Errorf("default ServiceCIDR: %w", err)
	}
	svcs, err := services.Services(ctx)
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, svc := range svcs {
		if err := p.ensureRecord(ctx, svc); err != nil {
			return err
		}
	}
	legacy, err := p.Store.List(ctx, store.ListOptions{Prefix: legacyIPPrefix})
	if err != nil {
		return fmt.Errorf("list old address keys: %w", err)
	}
	for _, kv := range legacy.Items {
		if _, _, err := p.Store.Delete(ctx, kv.Key, kv.ModRevision); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("delete %s: %w", kv.Key, err)
		}
	}
	return nil
}

// ensureRecord creates the IPAddress of svc's address when there is none;
// one held by someone else is reported, not taken over.
func (p *ServiceAllocator) ensureRecord(ctx context.Context, svc *corev1.Service) error {
	ip := net.ParseIP(serviceIP(svc))
	if ip == nil {
		return nil
	}
	err := p.claimIP(ctx, ip, svc, false)
	if errors.Is(err, store.ErrExists) {
		if p.Log != nil && !p.holds(ctx, ip.String(), svc) {
			p.Log.Warn("a Service's address is recorded for someone else", "service", svc.Namespace+"/"+svc.Name, "ip", ip.String())
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("record %s for %s/%s: %w", ip, svc.Namespace, svc.Name, err)
	}
	return nil
}

func (p *ServiceAllocator) holds(ctx context.Context, ip string, svc *corev1.Service) bool {
	res, err := p.resource("ipaddresses")
	if err != nil {
		return false
	}
	e, err := p.Objects.Get(ctx, res, "", ip)
	if err != nil {
		return false
	}
	rec, ok := e.Obj.(*networkingv1.IPAddress)
	return ok && heldBy(rec, svc)
}

// ensureDefaultServiceCIDR creates the ServiceCIDR of --service-cidr,
// ready and protected, as upstream's API server does at start. One that
// exists is left as it is: its ranges cannot change, and upstream only
// warns when they differ from the flag.
func (p *ServiceAllocator) ensureDefaultServiceCIDR(ctx context.Context) error {
	res, err := p.resource("servicecidrs")
	if err != nil {
		return err
	}
	if _, err := p.Objects.Get(ctx, res, "", DefaultServiceCIDR); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	c := &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceCIDR, UID: uuid.NewUUID(), CreationTimestamp: now,
			Finalizers: []string{ServiceCIDRFinalizer}},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{p.CIDR.String()}},
		Status: networkingv1.ServiceCIDRStatus{Conditions: []metav1.Condition{{
			Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
			Message: "Kubernetes default Service CIDR is ready", LastTransitionTime: now,
		}}},
	}
	if _, err := p.Objects.Create(ctx, res, c); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// repairIPs is one round of the address repair: an IPAddress of the
// allocator's that no Service holds is deleted, and a Service address
// without an IPAddress gets one, each only when it was found so in the
// previous round too, unchanged (the write that fixes it may be in
// flight). suspects maps "ip/<name>" and "svc/<ns>/<name>" to the
// revision seen; the round's suspects are returned.
func (p *ServiceAllocator) repairIPs(ctx context.Context, svcs []*corev1.Service, suspects map[string]int64) (map[string]int64, error) {
	res, err := p.resource("ipaddresses")
	if err != nil {
		return nil, err
	}
	entries, _, err := p.Objects.Cache().List(res, storage.Predicate{})
	if err != nil {
		return nil, err
	}
	records := map[string]*storage.Entry{}
	for _, e := range entries {
		if acc, err := meta.Accessor(e.Obj); err == nil {
			records[acc.GetName()] = e
		}
	}
	next := map[string]int64{}
	holders := map[string][]*corev1.Service{} // two only when one is wrongly so
	for _, svc := range svcs {
		ip := serviceIP(svc)
		if ip == "" {
			continue
		}
		holders[ip] = append(holders[ip], svc)
		if _, ok := records[ip]; ok {
			continue
		}
		key, rev := "svc/"+svc.Namespace+"/"+svc.Name, revisionOf(svc)
		if seen, ok := suspects[key]; ok && seen == rev {
			if err := p.ensureRecord(ctx, svc); err != nil && p.Log != nil {
				p.Log.Warn("service address repair", "err", err)
			}
			continue
		}
		next[key] = rev
	}
	for name, e := range records {
		rec, ok := e.Obj.(*networkingv1.IPAddress)
		if !ok || rec.Labels[networkingv1.LabelManagedBy] != ManagedByAllocator || heldByAny(rec, holders[name]) {
			continue
		}
		key := "ip/" + name
		if rev, ok := suspects[key]; ok && rev == e.Rev {
			if _, err := p.Objects.Delete(ctx, res, "", name, e.Rev); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, err
			}
			continue
		}
		next[key] = e.Rev
	}
	return next, nil
}

func heldByAny(rec *networkingv1.IPAddress, svcs []*corev1.Service) bool {
	for _, svc := range svcs {
		if heldBy(rec, svc) {
			return true
		}
	}
	return false
}

func revisionOf(svc *corev1.Service) int64 {
	rev, _ := storage.ParseResourceVersion(svc.ResourceVersion)
	return rev
}
