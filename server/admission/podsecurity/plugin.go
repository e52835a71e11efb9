package podsecurity

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/apiserver"
)

// NamespaceGetter reads namespaces.
type NamespaceGetter interface {
	// Namespace returns the named namespace, nil when there is none. A miss
	// in a cache must be confirmed against the store: the labels of a
	// namespace created a moment ago apply.
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// PodLister lists the pods of a namespace, to warn about the existing pods
// a new enforce level would refuse.
type PodLister interface {
	ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error)
}

// Warner takes the warnings of one request (Warning headers of the
// response).
type Warner interface {
	AddWarning(msg string)
}

// Plugin is upstream's PodSecurity admission plugin (a validating one):
// pods whose namespace enforces a level they break are refused (403);
// warn-level breaks become warnings; pod templates of workload resources
// are only warned about, never refused, because their pods are checked
// when they are made; namespaces with bad labels are refused (422), and a
// namespace update that tightens enforce warns about existing pods that
// would break it.
type Plugin struct {
	cfg        Config
	defaults   Policy
	eval       *Evaluator
	namespaces NamespaceGetter
	pods       PodLister
	warnings   func(ctx context.Context) Warner
	// maxPods bounds how many existing pods a namespace update checks.
	maxPods int
}

// New makes the plugin. warnings gives the Warner of the request in ctx
// (nil, or a nil Warner, drops the warnings).
func New(cfg Config, namespaces NamespaceGetter, pods PodLister, warnings func(ctx context.Context) Warner) (*Plugin, error) {
	cfg = cfg.withDefaults()
	defaults, err := cfg.policy()
	if err != nil {
		return nil, err
	}
	if namespaces == nil || pods == nil {
		return nil, fmt.Errorf("%w: a namespace getter and a pod lister are required", ErrConfig)
	}
	return &Plugin{cfg: cfg, defaults: defaults, eval: NewEvaluator(), namespaces: namespaces, pods: pods, warnings: warnings, maxPods: namespaceMaxPodsToCheck}, nil
}

var (
	podsResource       = schema.GroupResource{Resource: "pods"}
	namespacesResource = schema.GroupResource{Resource: "namespaces"}
	// workloadResources embed a pod template: warned about, not enforced.
	workloadResources = map[schema.GroupResource]bool{
		{Resource: "replicationcontrollers"}:      true,
		{Resource: "podtemplates"}:                true,
		{Group: "apps", Resource: "replicasets"}:  true,
		{Group: "apps", Resource: "deployments"}:  true,
		{Group: "apps", Resource: "statefulsets"}: true,
		{Group: "apps", Resource: "daemonsets"}:   true,
		{Group: "batch", Resource: "jobs"}:        true,
		{Group: "batch", Resource: "cronjobs"}:    true,
	}
	// ignoredPodSubresources cannot change what the checks look at. Every
	// other pod subresource (ephemeralcontainers, resize, ...) is checked,
	// so one added later fails safe.
	ignoredPodSubresources = map[string]bool{
		"exec": true, "attach": true, "binding": true, "eviction": true,
		"log": true, "portforward": true, "proxy": true, "status": true,
	}
)

// Admit implements apiserver.Admitter.
func (p *Plugin) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if (a.Op != apiserver.OpCreate && a.Op != apiserver.OpUpdate) || a.Resource == nil || a.Object == nil {
		return nil
	}
	gr := schema.GroupResource{Group: a.Resource.Group, Resource: a.Resource.Name}
	switch {
	case gr == namespacesResource:
		return p.admitNamespace(ctx, a)
	case gr == podsResource:
		return p.admitPod(ctx, a)
	case workloadResources[gr]:
		p.admitWorkload(ctx, a)
	}
	return nil
}

func (p *Plugin) warn(ctx context.Context, msgs ...string) {
	if p.warnings == nil {
		return
	}
	w := p.warnings(ctx)
	if w == nil {
		return
	}
	for _, m := range msgs {
		w.AddWarning(m)
	}
}

func (p *Plugin) exemptUser(a apiserver.AdmissionAttributes) bool {
	return a.User != nil && a.User.Name != "" && slices.Contains(p.cfg.Exemptions.Usernames, a.User.Name)
}

func (p *Plugin) exemptNamespace(ns string) bool {
	return ns != "" && slices.Contains(p.cfg.Exemptions.Namespaces, ns)
}

func (p *Plugin) exemptRuntimeClass(rc *string) bool {
	return rc != nil && *rc != "" && slices.Contains(p.cfg.Exemptions.RuntimeClasses, *rc)
}

// nsPolicy is the policy of the namespace; badLabels says some labels are
// invalid (the policy then reads them the safe way, see PolicyFromLabels).
func (p *Plugin) nsPolicy(ctx context.Context, name string) (pol Policy, badLabels bool, err error) {
	ns, err := p.namespaces.Namespace(ctx, name)
	if err == nil && ns == nil {
		err = fmt.Errorf("namespace %q not found", name)
	}
	if err != nil {
		return Policy{}, false, fmt.Errorf("failed to lookup namespace %q: %w", name, err)
	}
	pol, errs := PolicyFromLabels(ns.Labels, p.defaults)
	return pol, len(errs) > 0, nil
}

func (p *Plugin) admitPod(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if ignoredPodSubresources[a.Subresource] {
		return nil
	}
	acc, err := meta.Accessor(a.Object)
	if err != nil {
		return apierrors.NewBadRequest("failed to decode object")
	}
	ns := acc.GetNamespace()
	if p.exempt(ctx, a, ns) { // audit.go
		return nil
	}
	pol, badLabels, err := p.nsPolicy(ctx, ns)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to lookup namespace %q", ns))
	}
	if !badLabels && pol.fullyPrivileged() {
		annotate(ctx, enforcePolicyKey, LevelVersion{Level: LevelPrivileged, Version: Latest()}.String())
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("failed to decode pod")
	}
	if a.Op == apiserver.OpUpdate {
		old, ok := a.Old.(*corev1.Pod)
		if !ok {
			return apierrors.NewBadRequest("failed to decode old pod")
		}
		if !significantPodUpdate(pod, old) {
			return nil
		}
	}
	return p.evaluate(ctx, pol, &pod.ObjectMeta, &pod.Spec, podsResource, pod.Name, true)
}

// admitWorkload warns about a pod template; it never refuses: errors only
// skip the check, as upstream's do.
func (p *Plugin) admitWorkload(ctx context.Context, a apiserver.AdmissionAttributes) {
	if a.Subresource != "" {
		return
	}
	acc, err := meta.Accessor(a.Object)
	if err != nil {
		return
	}
	ns := acc.GetNamespace()
	if p.exempt(ctx, a, ns) { // audit.go
		return
	}
	pol, badLabels, err := p.nsPolicy(ctx, ns)
	if err != nil || (!badLabels && pol.Warn.Level == LevelPrivileged && pol.Audit.Level == LevelPrivileged) {
		return
	}
	podMeta, spec := podTemplate(a.Object)
	if spec == nil {
		return
	}
	_ = p.evaluate(ctx, pol, podMeta, spec, schema.GroupResource{}, "", false)
}

// podTemplate is the pod metadata and spec a workload makes pods from
// (nil when it has none).
func podTemplate(obj runtime.Object) (*metav1.ObjectMeta, *corev1.PodSpec) {
	var t *corev1.PodTemplateSpec
	switch o := obj.(type) {
	case *corev1.PodTemplate:
		t = &o.Template
	case *corev1.ReplicationController:
		t = o.Spec.Template
	case *appsv1.ReplicaSet:
		t = &o.Spec.Template
	case *appsv1.Deployment:
		t = &o.Spec.Template
	case *appsv1.DaemonSet:
		t = &o.Spec.Template
	case *appsv1.StatefulSet:
		t = &o.Spec.Template
	case *batchv1.Job:
		t = &o.Spec.Template
	case *batchv1.CronJob:
		t = &o.Spec.JobTemplate.Spec.Template
	}
	if t == nil {
		return nil, nil
	}
	return &t.ObjectMeta, &t.Spec
}

// evaluate checks a pod (enforce) or pod template against the policy: a
// break of enforce is the returned 403; a break of audit annotates the
// audit event (audit.go); a break of warn is a warning, not added to a
// request that is refused anyway.
func (p *Plugin) evaluate(ctx context.Context, pol Policy, podMeta *metav1.ObjectMeta, spec *corev1.PodSpec, gr schema.GroupResource, name string, enforce bool) error {
	if p.exemptRuntimeClass(spec.RuntimeClassName) {
		annotate(ctx, exemptKey, "runtimeClass")
		return nil
	}
	var enforced *Verdict
	if enforce {
		annotate(ctx, enforcePolicyKey, pol.Enforce.String())
		v := p.eval.Evaluate(pol.Enforce, podMeta, spec)
		p.auditViolations(ctx, pol, podMeta, spec, &v)
		if !v.Allowed {
			return apierrors.NewForbidden(gr, name, fmt.Errorf("violates PodSecurity %q: %s", pol.Enforce.String(), v.Detail()))
		}
		enforced = &v
	} else {
		p.auditViolations(ctx, pol, podMeta, spec, nil)
	}
	v := Verdict{}
	if enforced != nil && pol.Warn == pol.Enforce {
		v = *enforced
	} else {
		v = p.eval.Evaluate(pol.Warn, podMeta, spec)
	}
	if !v.Allowed {
		p.warn(ctx, fmt.Sprintf("would violate PodSecurity %q: %s", pol.Warn.String(), v.Detail()))
	}
	return nil
}

// significantPodUpdate: of what the checks look at, only container images
// and new ephemeral containers can change on a running pod; other updates
// (labels, status-like edits, resizes) need no new verdict.
func significantPodUpdate(pod, old *corev1.Pod) bool {
	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return true
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image != old.Spec.Containers[i].Image {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Image != old.Spec.InitContainers[i].Image {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		i := slices.IndexFunc(old.Spec.EphemeralContainers, func(o corev1.EphemeralContainer) bool { return o.Name == c.Name })
		if i < 0 || old.Spec.EphemeralContainers[i].Image != c.Image {
			return true
		}
	}
	return false
}

// ValidatingPhase: Pod Security runs after the object is validated, as
// upstream's validating plugin does (an invalid pod gets its 422 first).
func (*Plugin) ValidatingPhase() {}
