// Package podenv computes a container's environment the way the kubelet
// does: envFrom, then env with $(VAR) expansion and valueFrom (ConfigMap and
// Secret keys, downward API fields and resources), then the service link
// variables (default/kubernetes and, with enableServiceLinks, every Service
// of the pod's namespace).
package podenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrConfig marks (wrapped) every error that makes a container's
// environment impossible to build: the kubelet reports those as
// CreateContainerConfigError with the error's message.
var ErrConfig = errors.New("container config error")

// Getter reads the API objects a container's environment refers to.
type Getter interface {
	// ConfigMap returns the ConfigMap ns/name; a missing one is an error
	// for which apierrors.IsNotFound is true.
	ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	// Secret returns the Secret ns/name; a missing one is an error for
	// which apierrors.IsNotFound is true.
	Secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
	// Service returns the Service ns/name. Resolve asks only for
	// default/kubernetes, whose link variables every pod gets; a missing
	// one leaves them out.
	Service(ctx context.Context, ns, name string) (*corev1.Service, error)
	// Services lists the Services of namespace ns: with enableServiceLinks
	// (the default) each one's link variables are injected.
	Services(ctx context.Context, ns string) ([]corev1.Service, error)
	// Node returns the named Node: its allocatable is what limits.* of a
	// container without that limit report.
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// ClientGetter is a Getter reading straight from the API server.
type ClientGetter struct{ Client kubernetes.Interface }

// ConfigMap implements Getter.
func (g ClientGetter) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return g.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

// Secret implements Getter.
func (g ClientGetter) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return g.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// Service implements Getter.
func (g ClientGetter) Service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	return g.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
}

// Services implements Getter.
func (g ClientGetter) Services(ctx context.Context, ns string) ([]corev1.Service, error) {
	list, err := g.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Node implements Getter.
func (g ClientGetter) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return g.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// Options are Resolve's optional inputs.
type Options struct {
	// NodeAllocatable is used by resourceFieldRef limits.* for a container
	// without that limit (the kubelet's behaviour).
	NodeAllocatable corev1.ResourceList
	// NodeName, when NodeAllocatable is nil, names the Node whose
	// allocatable is read (through the Getter, only when a limits.*
	// reference needs it). With neither, an unset limit reads "0".
	NodeName string
}

// Resolve returns container c's environment as KEY=VALUE, see
// ResolveWithOptions.
func Resolve(ctx context.Context, g Getter, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([]string, error) {
	return ResolveWithOptions(ctx, g, pod, c, podIP, hostIP, Options{})
}

// ResolveWithOptions returns container c's environment as KEY=VALUE in a
// stable order: envFrom sources in order (prefix added; keys that are not
// valid variable names skipped; a later source overrides an earlier one),
// then env in order (later entries override; values expand $(VAR) against
// everything defined before them and the service variables), then the
// service link variables not already set: default/kubernetes' always, and
// those of every Service of the pod's namespace unless
// enableServiceLinks is false. A missing non-optional ConfigMap, Secret or
// key, or Services that cannot be read, is an error (wrapping ErrConfig)
// that names it.
func ResolveWithOptions(ctx context.Context, g Getter, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string, opts Options) ([]string, error) {
	env := newOrdered()
	svc, err := serviceEnv(ctx, g, pod)
	switch {
	case err != nil && isStatic(pod):
		// As upstream, a static pod does not wait for the API: it starts
		// without the link variables it cannot read.
		svc = newOrdered()
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, from := range c.EnvFrom {
		if err := addEnvFrom(ctx, g, pod.Namespace, from, env); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env.vals[name]; ok {
			return v, true
		}
		v, ok := svc.vals[name]
		return v, ok
	}
	alloc := allocatableOnce(ctx, g, opts)
	for _, ev := range c.Env {
		val := ev.Value
		if val != "" {
			val = Expand(val, lookup)
		} else if ev.ValueFrom != nil {
			v, skip, err := valueFrom(ctx, g, pod, c, ev, podIP, hostIP, alloc)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConfig, err)
			}
			if skip {
				continue
			}
			val = v
		}
		env.set(ev.Name, val)
	}
	for _, k := range svc.keys {
		if _, ok := env.vals[k]; !ok {
			env.set(k, svc.vals[k])
		}
	}
	out := make([]string, 0, len(env.keys))
	for _, k := range env.keys {
		out = append(out, k+"="+env.vals[k])
	}
	return out, nil
}

// allocatableOnce returns the node allocatable of opts, reading the Node
// at most once and only when asked.
func allocatableOnce(ctx context.Context, g Getter, opts Options) func() (corev1.ResourceList, error) {
	var (
		done  bool
		alloc corev1.ResourceList
		err   error
	)
	return func() (corev1.ResourceList, error) {
		if opts.NodeAllocatable != nil || opts.NodeName == "" {
			return opts.NodeAllocatable, nil
		}
		if !done {
			done = true
			var n *corev1.Node
			if n, err = g.Node(ctx, opts.NodeName); err == nil {
				alloc = n.Status.Allocatable
			} else {
				err = fmt.Errorf("failed to find node object %s for the default limits: %w", opts.NodeName, err)
			}
		}
		return alloc, err
	}
}

// ordered is a map that remembers first insertion order.
type ordered struct {
	keys []string
	vals map[string]string
}

func newOrdered() *ordered { return &ordered{vals: map[string]string{}} }

func (o *ordered) set(k, v string) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func addEnvFrom(ctx context.Context, g Getter, ns string, from corev1.EnvFromSource, env *ordered) error {
	var data map[string]string
	switch {
	case from.ConfigMapRef != nil:
		ref := from.ConfigMapRef
		cm, err := g.ConfigMap(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return nil
			}
			return fmt.Errorf("couldn't get configMap %s/%s: %w", ns, ref.Name, err)
		}
		data = cm.Data
	case from.SecretRef != nil:
		ref := from.SecretRef
		s, err := g.Secret(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return nil
			}
			return fmt.Errorf("couldn't get secret %s/%s: %w", ns, ref.Name, err)
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
	default:
		return nil
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := from.Prefix + k
		if !IsEnvVarName(name) {
			continue
		}
		env.set(name, data[k])
	}
	return nil
}

// valueFrom resolves one env var's valueFrom; skip is true when an
// optional source is missing and the variable is left out.
func valueFrom(ctx context.Context, g Getter, pod *corev1.Pod, c *corev1.Container, ev corev1.EnvVar, podIP, hostIP string, alloc func() (corev1.ResourceList, error)) (val string, skip bool, err error) {
	ns := pod.Namespace
	vf := ev.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := FieldValue(pod, vf.FieldRef.FieldPath, podIP, hostIP)
		if err != nil {
			return "", false, fmt.Errorf("env %s: %w", ev.Name, err)
		}
		return v, false, nil
	case vf.ResourceFieldRef != nil:
		ref := vf.ResourceFieldRef
		name := ref.ContainerName
		if name == "" {
			name = c.Name
		}
		var allocatable corev1.ResourceList
		if NeedsAllocatable(pod, name, ref.Resource) {
			if allocatable, err = alloc(); err != nil {
				return "", false, fmt.Errorf("env %s: %w", ev.Name, err)
			}
		}
		v, err := ResourceValue(pod, name, ref.Resource, ref.Divisor, allocatable)
		if err != nil {
			return "", false, fmt.Errorf("env %s: %w", ev.Name, err)
		}
		return v, false, nil
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm, err := g.ConfigMap(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't get configMap %s/%s: %w", ns, ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, ns, ref.Name)
		}
		return v, false, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		s, err := g.Secret(ctx, ns, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't get secret %s/%s: %w", ns, ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, ns, ref.Name)
		}
		return string(v), false, nil
	}
	return "", false, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// isStatic reports whether the pod came from a manifest file rather than
// the API (the kubelet's kubernetes.io/config.source annotation).
func isStatic(pod *corev1.Pod) bool {
	src, ok := pod.Annotations["kubernetes.io/config.source"]
	return ok && src != "api"
}

// serviceEnv returns the Docker-link style variables the pod gets, as the
// kubelet's getServiceEnvVarMap: default/kubernetes always, and with
// enableServiceLinks (nil counts as the API default, true) every Service
// of the pod's namespace with a cluster IP; a Service of the pod's own
// namespace wins over default/kubernetes of the same name. Services are
// taken in name order so the result is stable.
func serviceEnv(ctx context.Context, g Getter, pod *corev1.Pod) (*ordered, error) {
	byName := map[string]*corev1.Service{}
	master, err := g.Service(ctx, metav1.NamespaceDefault, "kubernetes")
	switch {
	case err == nil && master != nil:
		byName[master.Name] = master
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("failed to get service default/kubernetes when setting up env vars: %w", err)
	}
	if links := pod.Spec.EnableServiceLinks; links == nil || *links {
		list, err := g.Services(ctx, pod.Namespace)
		if err != nil {
			return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
		}
		for i := range list {
			byName[list[i].Name] = &list[i]
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := newOrdered()
	for _, n := range names {
		for _, kv := range ServiceLinkEnv(byName[n]) {
			k, v, _ := strings.Cut(kv, "=")
			out.set(k, v)
		}
	}
	return out, nil
}

// ServiceLinkEnv returns the variables the kubelet injects for a Service
// with a cluster IP (none for headless ones): <NAME>_SERVICE_HOST,
// <NAME>_SERVICE_PORT (first port), <NAME>_SERVICE_PORT_<PORTNAME> per
// named port, <NAME>_PORT (first port's URL) and per port
// <NAME>_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}.
func ServiceLinkEnv(svc *corev1.Service) []string {
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return nil
	}
	name := envName(svc.Name)
	first := svc.Spec.Ports[0]
	out := []string{
		name + "_SERVICE_HOST=" + ip,
		name + "_SERVICE_PORT=" + strconv.Itoa(int(first.Port)),
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			out = append(out, name+"_SERVICE_PORT_"+envName(p.Name)+"="+strconv.Itoa(int(p.Port)))
		}
	}
	out = append(out, name+"_PORT="+portURL(first, ip))
	for _, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, strings.ToUpper(proto))
		out = append(out,
			prefix+"="+portURL(p, ip),
			prefix+"_PROTO="+strings.ToLower(proto),
			prefix+"_PORT="+strconv.Itoa(int(p.Port)),
			prefix+"_ADDR="+ip,
		)
	}
	return out
}

func portURL(p corev1.ServicePort, ip string) string {
	proto := strings.ToLower(string(p.Protocol))
	if proto == "" {
		proto = "tcp"
	}
	return proto + "://" + net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
}

func envName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
