package scheduler

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// spreadSelectors finds, for default topology spreading, the pods that
// belong with a pod: the ones its Services select, narrowed by its
// controller's selector, as upstream's DefaultSelector does.
type spreadSelectors struct {
	services     corelisters.ServiceLister
	rcs          corelisters.ReplicationControllerLister
	replicaSets  appslisters.ReplicaSetLister
	statefulSets appslisters.StatefulSetLister
}

var (
	rcKind = v1.SchemeGroupVersion.WithKind("ReplicationController")
	rsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	ssKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
)

func (s *spreadSelectors) selector(pod *v1.Pod) labels.Selector {
	set := labels.Set{}
	if s.services != nil {
		if svcs, err := s.services.Services(pod.Namespace).List(labels.Everything()); err == nil {
			for _, svc := range svcs {
				if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
					set = labels.Merge(set, svc.Spec.Selector)
				}
			}
		}
	}
	sel := set.AsSelector()
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return sel
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return sel
	}
	var other *metav1.LabelSelector
	switch gv.WithKind(owner.Kind) {
	case rcKind:
		if s.rcs != nil {
			if rc, err := s.rcs.ReplicationControllers(pod.Namespace).Get(owner.Name); err == nil {
				return labels.Merge(set, rc.Spec.Selector).AsSelector()
			}
		}
	case rsKind:
		if s.replicaSets != nil {
			if rs, err := s.replicaSets.ReplicaSets(pod.Namespace).Get(owner.Name); err == nil {
				other = rs.Spec.Selector
			}
		}
	case ssKind:
		if s.statefulSets != nil {
			if ss, err := s.statefulSets.StatefulSets(pod.Namespace).Get(owner.Name); err == nil {
				other = ss.Spec.Selector
			}
		}
	}
	if other == nil {
		return sel
	}
	o, err := metav1.LabelSelectorAsSelector(other)
	if err != nil {
		return sel
	}
	if reqs, ok := o.Requirements(); ok {
		sel = sel.Add(reqs...)
	}
	return sel
}
