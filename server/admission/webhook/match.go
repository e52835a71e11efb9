package webhook

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"skiff/server/apiserver"
)

// hook is one webhook of either kind with upstream's defaults applied, so
// that a configuration stored without them behaves as upstream's would.
type hook struct {
	name          string
	key           string // configuration name and index: identifies it across rounds
	mutating      bool
	clientConfig  admissionregistrationv1.WebhookClientConfig
	rules         []admissionregistrationv1.RuleWithOperations
	failurePolicy admissionregistrationv1.FailurePolicyType
	matchPolicy   admissionregistrationv1.MatchPolicyType
	nsSelector    *metav1.LabelSelector
	objSelector   *metav1.LabelSelector
	sideEffects   *admissionregistrationv1.SideEffectClass
	timeout       time.Duration
	versions      []string
	reinvoke      bool
	conditions    []admissionregistrationv1.MatchCondition
}

func newHook(config string, i int, mutating bool) *hook {
	return &hook{key: fmt.Sprintf("%s/%d", config, i), mutating: mutating,
		failurePolicy: admissionregistrationv1.Fail, matchPolicy: admissionregistrationv1.Equivalent, timeout: 10 * time.Second}
}

func (h *hook) setCommon(fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, timeout *int32) {
	if fp != nil {
		h.failurePolicy = *fp
	}
	if mp != nil {
		h.matchPolicy = *mp
	}
	if timeout != nil {
		h.timeout = time.Duration(*timeout) * time.Second
	}
}

func fromMutating(c *admissionregistrationv1.MutatingWebhookConfiguration, i int) *hook {
	w := c.Webhooks[i]
	h := newHook(c.Name, i, true)
	h.name, h.clientConfig, h.rules, h.nsSelector, h.objSelector = w.Name, w.ClientConfig, w.Rules, w.NamespaceSelector, w.ObjectSelector
	h.sideEffects, h.versions, h.conditions = w.SideEffects, w.AdmissionReviewVersions, w.MatchConditions
	h.setCommon(w.FailurePolicy, w.MatchPolicy, w.TimeoutSeconds)
	h.reinvoke = w.ReinvocationPolicy != nil && *w.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
	return h
}

func fromValidating(c *admissionregistrationv1.ValidatingWebhookConfiguration, i int) *hook {
	w := c.Webhooks[i]
	h := newHook(c.Name, i, false)
	h.name, h.clientConfig, h.rules, h.nsSelector, h.objSelector = w.Name, w.ClientConfig, w.Rules, w.NamespaceSelector, w.ObjectSelector
	h.sideEffects, h.versions, h.conditions = w.SideEffects, w.AdmissionReviewVersions, w.MatchConditions
	h.setCommon(w.FailurePolicy, w.MatchPolicy, w.TimeoutSeconds)
	return h
}

// target is what a matched webhook is told the request is about: the
// request's own resource, or, matched through the Equivalent policy, the
// same group and resource in the version the rule names.
type target struct {
	gvr schema.GroupVersionResource
	gvk schema.GroupVersionKind
}

// matchRules is upstream's rule matching: the request's own version
// first, then (matchPolicy Equivalent) another served version of the same
// group and resource.
func (d *dispatcher) matchRules(h *hook, r *request) (target, bool) {
	own := target{gvr: r.gvr, gvk: r.gvk}
	for _, rule := range h.rules {
		if ruleMatches(rule, r, r.gvr.Version) {
			return own, true
		}
	}
	if h.matchPolicy != admissionregistrationv1.Equivalent || d.cfg.Resources == nil {
		return target{}, false
	}
	for _, rule := range h.rules {
		for _, v := range rule.APIVersions {
			if v == "*" || v == r.gvr.Version || !ruleMatches(rule, r, v) {
				continue
			}
			res, ok := d.cfg.Resources.Lookup(r.gvr.Group, v, r.gvr.Resource)
			if !ok {
				continue
			}
			gvk := r.gvk
			if r.sub == "" {
				gvk = res.GVK()
			}
			gvk.Version = v
			return target{gvr: res.GVR(), gvk: gvk}, true
		}
	}
	return target{}, false
}

func ruleMatches(rule admissionregistrationv1.RuleWithOperations, r *request, version string) bool {
	return matchOp(rule.Operations, r.op) && matchAny(rule.APIGroups, r.gvr.Group) && matchAny(rule.APIVersions, version) &&
		matchResource(rule.Resources, r.gvr.Resource, r.sub) && matchScope(rule.Scope, r)
}

func matchOp(ops []admissionregistrationv1.OperationType, op apiserver.Operation) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll || string(o) == string(op) {
			return true
		}
	}
	return false
}

func matchAny(list []string, s string) bool {
	for _, v := range list {
		if v == "*" || v == s {
			return true
		}
	}
	return false
}

// matchResource: "pods" is the resource alone, "pods/status" one
// subresource, "pods/*" the resource and all its subresources, "*" every
// resource (no subresources) and "*/*" everything.
func matchResource(list []string, res, sub string) bool {
	for _, entry := range list {
		r, s, _ := strings.Cut(entry, "/")
		if (r == "*" || r == res) && (s == "*" || s == sub) {
			return true
		}
	}
	return false
}

// matchScope: a Namespace object counts as cluster-scoped, as upstream.
func matchScope(scope *admissionregistrationv1.ScopeType, r *request) bool {
	if scope == nil || *scope == admissionregistrationv1.AllScopes {
		return true
	}
	isNamespace := r.gvr.Group == "" && r.gvr.Resource == "namespaces"
	switch *scope {
	case admissionregistrationv1.NamespacedScope:
		return !isNamespace && r.namespace != ""
	case admissionregistrationv1.ClusterScope:
		return isNamespace || r.namespace == ""
	}
	return false
}

// matchNamespace is upstream's namespaceSelector: every cluster-scoped
// object other than a Namespace matches; a Namespace is judged by its own
// labels (the new ones, except on delete).
func (d *dispatcher) matchNamespace(ctx context.Context, h *hook, r *request) (bool, error) {
	isNamespace := r.gvr.Group == "" && r.gvr.Resource == "namespaces"
	if r.namespace == "" && !isNamespace {
		return true, nil
	}
	sel, err := selector(h.nsSelector)
	if err != nil || sel.Empty() {
		return err == nil, err
	}
	if isNamespace && r.sub == "" {
		obj := r.obj
		if r.op == apiserver.OpDelete || obj == nil {
			obj = r.old
		}
		if acc, err := meta.Accessor(obj); err == nil && obj != nil {
			return sel.Matches(labels.Set(acc.GetLabels())), nil
		}
	}
	name := r.namespace
	if isNamespace {
		name = r.name
	}
	if d.cfg.Namespaces == nil {
		return false, apierrors.NewInternalError(fmt.Errorf("namespaces cannot be looked up"))
	}
	ns, err := d.cfg.Namespaces.Namespace(ctx, name)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// matchObject is upstream's objectSelector: the labels of the new or of
// the old object match.
func matchObject(h *hook, r *request) (bool, error) {
	sel, err := selector(h.objSelector)
	if err != nil || sel.Empty() {
		return err == nil, err
	}
	for _, o := range []runtime.Object{r.obj, r.old} {
		if o == nil || r.op == apiserver.OpConnect {
			continue
		}
		if acc, err := meta.Accessor(o); err == nil && sel.Matches(labels.Set(acc.GetLabels())) {
			return true, nil
		}
	}
	return false, nil
}

func selector(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return sel, nil
}
