package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/registry"
)

// statusField returns the object's Status field, if it has one.
func statusField(obj runtime.Object) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName("Status")
	return f, f.IsValid() && f.CanSet()
}

// resetStatusOnCreate drops the status a client sent with a new object, as
// upstream's strategies do: status belongs to controllers and kubelets. A
// few kinds start in a known phase; nodes register with their status.
func resetStatusOnCreate(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Node:
		return
	case *corev1.Pod:
		o.Status = corev1.PodStatus{Phase: corev1.PodPending}
		return
	case *corev1.PersistentVolumeClaim:
		o.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
		return
	case *corev1.PersistentVolume:
		o.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
		return
	case *unstructured.Unstructured:
		delete(o.Object, "status")
		return
	}
	if f, ok := statusField(obj); ok {
		f.Set(reflect.Zero(f.Type()))
	}
}

// copyStatus sets dst's status to src's.
func copyStatus(dst, src runtime.Object) {
	if d, ok := customStatus(dst); ok {
		if s, ok := customStatus(src); ok {
			setCustomStatus(d, s)
		}
		return
	}
	d, ok1 := statusField(dst)
	s, ok2 := statusField(src)
	if ok1 && ok2 && d.Type() == s.Type() {
		d.Set(s)
	}
}

// specEqual reports whether two objects agree on everything but metadata
// and status: what metadata.generation counts.
func specEqual(a, b runtime.Object) bool {
	return bytes.Equal(withoutMetaStatus(a), withoutMetaStatus(b))
}

func withoutMetaStatus(obj runtime.Object) []byte {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	delete(m, "metadata")
	delete(m, "status")
	out, _ := json.Marshal(m) // map keys marshal sorted: a stable encoding
	return out
}

// podQOS is a pod's quality-of-service class as upstream computes it:
// Guaranteed when every container limits cpu and memory with requests equal
// to limits, BestEffort when nothing is requested or limited, else Burstable.
func podQOS(pod *corev1.Pod) corev1.PodQOSClass {
	containers := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	anything, guaranteed := false, true
	for _, c := range containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[name]
			lim, hasLim := c.Resources.Limits[name]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				anything = true
			}
			if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !anything:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// statusMeta are the metadata fields a write to /status takes from the
// request unless the resource's row keeps them as stored.
var statusMeta = map[string]func(dst, src metav1.Object){
	"labels":          func(d, s metav1.Object) { d.SetLabels(s.GetLabels()) },
	"annotations":     func(d, s metav1.Object) { d.SetAnnotations(s.GetAnnotations()) },
	"finalizers":      func(d, s metav1.Object) { d.SetFinalizers(s.GetFinalizers()) },
	"ownerReferences": func(d, s metav1.Object) { d.SetOwnerReferences(s.GetOwnerReferences()) },
}

// statusUpdate is what a write to /status stores: the stored object with
// the request's status and metadata, as upstream's status strategies do
// (spec never changes here; res.StatusKeeps names metadata that does not
// either). Server-owned metadata is reset by the caller.
func statusUpdate(res *registry.Resource, obj, old runtime.Object) runtime.Object {
	fresh := old.DeepCopyObject()
	copyStatus(fresh, obj)
	dst, err1 := meta.Accessor(fresh)
	src, err2 := meta.Accessor(obj)
	if err1 != nil || err2 != nil {
		return fresh
	}
	for name, set := range statusMeta {
		if !slices.Contains(res.StatusKeeps, name) {
			set(dst, src)
		}
	}
	dst.SetManagedFields(src.GetManagedFields())
	return fresh
}
