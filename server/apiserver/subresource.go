package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/registry"
	"skiff/server/storage"
)

// serveSubresource dispatches /status, /scale, /binding, /eviction and
// /finalize, which discovery lists per resource.
func (s *Server) serveSubresource(q *request) {
	if q.info.Subresource == "proxy" && q.res.Group == "" {
		s.serveProxy(q) // proxy_resource.go: every method, not only the listed verbs
		return
	}
	var served *subresource
	for _, sub := range subresources(q.res) {
		if sub.name == q.info.Subresource {
			sub := sub
			served = &sub
		}
	}
	if served == nil || !contains(served.verbs, q.info.Verb) {
		writeError(q.w, q.r, apierrors.NewNotFound(schema.GroupResource{Group: q.res.Group, Resource: q.res.Name + "/" + q.info.Subresource}, q.info.Name))
		return
	}
	if q.res.Group == "" && q.res.Name == "pods" && proxiedPodSubresources[q.info.Subresource] {
		s.proxyToKubelet(q) // podproxy.go
		return
	}
	switch q.info.Subresource + ":" + q.info.Verb {
	case "status:get", "approval:get", "ephemeralcontainers:get", "resize:get":
		s.get(q)
	case "status:update", "approval:update", "ephemeralcontainers:update", "resize:update":
		s.update(q)
	case "status:patch", "approval:patch", "ephemeralcontainers:patch", "resize:patch":
		s.patch(q)
	case "scale:get", "scale:update", "scale:patch":
		s.scale(q)
	case "binding:create":
		s.bind(q)
	case "eviction:create":
		s.evict(q)
	case "finalize:update":
		s.finalizeNamespace(q)
	case "token:create":
		s.issueToken(q)
	default:
		writeError(q.w, q.r, apierrors.NewMethodNotSupported(q.res.GVR().GroupResource(), q.info.Verb))
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// scaleOf reads the replicas and selector of a scalable object.
func scaleOf(res *registry.Resource, obj runtime.Object) (*autoscalingv1.Scale, error) {
	var spec, status int32
	var sel string
	var err error
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if spec, status, sel, err = customScale(res, o); err != nil { // custom.go
			return nil, err
		}
	case *appsv1.Deployment:
		spec, status, sel = deref32(o.Spec.Replicas), o.Status.Replicas, selectorString(o.Spec.Selector)
	case *appsv1.ReplicaSet:
		spec, status, sel = deref32(o.Spec.Replicas), o.Status.Replicas, selectorString(o.Spec.Selector)
	case *appsv1.StatefulSet:
		spec, status, sel = deref32(o.Spec.Replicas), o.Status.Replicas, selectorString(o.Spec.Selector)
	case *corev1.ReplicationController:
		spec, status, sel = deref32(o.Spec.Replicas), o.Status.Replicas, labels.SelectorFromSet(o.Spec.Selector).String()
	default:
		return nil, fmt.Errorf("%T has no scale subresource", obj)
	}
	acc, _ := meta.Accessor(obj)
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: acc.GetName(), Namespace: acc.GetNamespace(), UID: acc.GetUID(),
			ResourceVersion: acc.GetResourceVersion(), CreationTimestamp: acc.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: sel},
	}, nil
}

func setReplicas(res *registry.Resource, obj runtime.Object, n int32) error {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if res.ScaleHooks == nil || res.ScaleHooks.Set == nil {
			return apierrors.NewInternalError(fmt.Errorf("%s has no scale subresource", res.Kind))
		}
		if err := res.ScaleHooks.Set(o, n); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	case *appsv1.StatefulSet:
		o.Spec.Replicas = &n
	case *corev1.ReplicationController:
		o.Spec.Replicas = &n
	}
	return nil
}

func deref32(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func selectorString(ls *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return ""
	}
	return sel.String()
}

// scale serves the scale subresource: reads map the parent to a Scale,
// writes (update or patch of the Scale) set the parent's spec.replicas.
func (s *Server) scale(q *request) {
	ctx := q.r.Context()
	if q.info.Verb == "get" {
		e, err := s.st.Get(ctx, q.res, q.info.Namespace, q.info.Name)
		if err == nil {
			var sc *autoscalingv1.Scale
			if sc, err = scaleOf(q.res, e.Obj); err == nil {
				writeJSON(q.w, q.r, http.StatusOK, sc)
				return
			}
			err = apierrors.NewInternalError(err)
		}
		writeError(q.w, q.r, err)
		return
	}
	body, err := s.readBody(q.w, q.r)
	dry, derr := dryRun(q.r)
	if err = firstErr(err, derr); err != nil {
		writeError(q.w, q.r, err)
		return
	}
	sub := *q
	sub.info.Subresource = "" // the parent is written as a main-resource update
	e, err := s.updateLoop(ctx, &sub, 0, dry, func(cur runtime.Object) (runtime.Object, error) {
		want, err := s.newScale(q, cur, body)
		if err != nil {
			return nil, err
		}
		if err := setReplicas(q.res, cur, want.Spec.Replicas); err != nil {
			return nil, err
		}
		return cur, nil
	})
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	sc, err := scaleOf(q.res, e.Obj)
	if err != nil {
		writeError(q.w, q.r, apierrors.NewInternalError(err))
		return
	}
	writeJSON(q.w, q.r, http.StatusOK, sc)
}

// newScale is the Scale the client wants: the body of an update, or the
// current Scale with the patch applied.
func (s *Server) newScale(q *request, cur runtime.Object, body []byte) (*autoscalingv1.Scale, error) {
	sc, err := scaleOf(q.res, cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var want autoscalingv1.Scale
	if q.info.Verb == "update" {
		if err := s.decodeBody(q.w, q.r, body, &want, validationIgnore); err != nil {
			return nil, err
		}
	} else {
		var doc []byte
		curJSON, _ := json.Marshal(sc)
		mt, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
		switch types.PatchType(mt) {
		case types.JSONPatchType:
			p, perr := decodeJSONPatch(body)
			if perr != nil {
				return nil, perr
			}
			doc, err = p.Apply(curJSON)
		case types.MergePatchType:
			doc, err = jsonpatch.MergePatch(curJSON, body)
		case types.StrategicMergePatchType:
			doc, err = strategicpatch.StrategicMergePatch(curJSON, body, &autoscalingv1.Scale{})
		default:
			return nil, unsupportedMediaType(q.r.Header.Get("Content-Type"))
		}
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the patch could not be applied: %v", err))
		}
		if err := json.Unmarshal(doc, &want); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid Scale: %v", err))
		}
	}
	if want.ResourceVersion != "" && want.ResourceVersion != sc.ResourceVersion {
		return nil, conflict(q)
	}
	if want.Spec.Replicas < 0 {
		return nil, apierrors.NewBadRequest("spec.replicas must be greater than or equal to 0")
	}
	return &want, nil
}

// bindable checks a Binding's preconditions against the stored pod: a pod
// deleted and recreated under the same name while a bind was in flight must
// not inherit the node chosen for its predecessor.
func bindable(q *request, pod *corev1.Pod, b *corev1.Binding) error {
	gr := q.res.GVR().GroupResource()
	switch {
	case b.UID != "" && pod.UID != b.UID:
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
	case b.ResourceVersion != "" && pod.ResourceVersion != b.ResourceVersion:
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("precondition failed: resourceVersion in precondition: %v, resourceVersion in object meta: %v", b.ResourceVersion, pod.ResourceVersion))
	case len(pod.Spec.SchedulingGates) != 0:
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("pod %v has non-empty .spec.schedulingGates", pod.Name))
	}
	return nil
}

// bind assigns a pod to a node (the scheduler's write), refusing a pod that
// is already bound.
func (s *Server) bind(q *request) {
	body, err := s.readBody(q.w, q.r)
	var b corev1.Binding
	if err == nil {
		err = s.decodeBody(q.w, q.r, body, &b, validationIgnore)
	}
	if err == nil && b.Target.Name == "" {
		err = apierrors.NewBadRequest("Binding.target.name is required")
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	s.bindPod(q, q.res, q.info.Name, &b)
}

// bindings serves POST /api/v1/namespaces/NS/bindings, the older form of
// pods/NAME/binding: the Binding's own name names the pod.
func (s *Server) bindings(q *request) {
	body, err := s.readBody(q.w, q.r)
	var b corev1.Binding
	if err == nil {
		err = s.decodeBody(q.w, q.r, body, &b, validationIgnore)
	}
	if err == nil && b.Name == "" {
		err = apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if err == nil && b.Target.Name == "" {
		err = apierrors.NewBadRequest("Binding.target.name is required")
	}
	if err == nil && b.Namespace != "" && b.Namespace != q.info.Namespace {
		err = apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	pods, ok := s.reg.Lookup("", "v1", "pods")
	if err == nil && !ok {
		err = apierrors.NewInternalError(errors.New("pods are not served"))
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	s.bindPod(q, pods, b.Name, &b)
}

// bindPod assigns the pod to the Binding's target node, once.
func (s *Server) bindPod(q *request, pods *registry.Resource, name string, b *corev1.Binding) {
	_, err := s.st.GuaranteedUpdate(q.r.Context(), pods, q.info.Namespace, name, func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(pods.GVR().GroupResource(), pod.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(pods.GVR().GroupResource(), pod.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		if err := bindable(q, pod, b); err != nil {
			return nil, err
		}
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		pod.Spec.NodeName = b.Target.Name
		setPodScheduled(pod)
		return pod, nil
	})
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeJSON(q.w, q.r, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

func setPodScheduled(pod *corev1.Pod) {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), ObservedGeneration: pod.Generation}
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			pod.Status.Conditions[i] = cond
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}

// finalizeNamespace replaces a namespace's spec.finalizers; a terminating
// namespace with none left (and no metadata finalizers) is deleted.
func (s *Server) finalizeNamespace(q *request) {
	ctx := q.r.Context()
	body, err := s.readBody(q.w, q.r)
	var want corev1.Namespace
	if err == nil {
		err = s.decodeBody(q.w, q.r, body, &want, validationIgnore)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	e, err := s.st.GuaranteedUpdate(ctx, q.res, "", q.info.Name, func(cur runtime.Object) (runtime.Object, error) {
		ns := cur.(*corev1.Namespace)
		ns.Spec.Finalizers = want.Spec.Finalizers
		return ns, nil
	})
	if err == nil {
		e, err = s.deleteIfFinalized(ctx, q, e)
	}
	if err != nil {
		writeError(q.w, q.r, err)
		return
	}
	writeObject(q.w, q.r, http.StatusOK, e.Obj, e.Raw)
}

func (s *Server) deleteIfFinalized(ctx context.Context, q *request, e *storage.Entry) (*storage.Entry, error) {
	ns := e.Obj.(*corev1.Namespace)
	if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) > 0 || len(ns.Finalizers) > 0 {
		return e, nil
	}
	return s.st.Delete(ctx, q.res, "", ns.Name, e.Rev)
}
