package replicaset

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func fullReplicationController() *corev1.ReplicationController {
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "rc-uid", Generation: 3, ResourceVersion: "42",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: new(int32(3)), MinReadySeconds: 7,
			Selector: map[string]string{"app": "web"},
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "fe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
		Status: corev1.ReplicationControllerStatus{
			Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, ObservedGeneration: 2,
			Conditions: []corev1.ReplicationControllerCondition{{Type: corev1.ReplicationControllerReplicaFailure, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(now), Reason: "FailedCreate", Message: "quota"}},
		},
	}
}

func TestReplicationControllerConversion_RoundTrip_KeepsEveryField(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   func() *corev1.ReplicationController
	}{
		{"every field set", fullReplicationController},
		{"no status conditions", func() *corev1.ReplicationController {
			rc := fullReplicationController()
			rc.Status = corev1.ReplicationControllerStatus{}
			return rc
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := tc.rc()
			if got := replicationControllerOf(replicaSetOf(rc)); !reflect.DeepEqual(got, rc) {
				t.Errorf("round trip changed the object:\n got %+v\nwant %+v", got, rc)
			}
		})
	}
}

func TestReplicationControllerConversion_SelectorMatchesAsTheMapDoes(t *testing.T) {
	rs := replicaSetOf(fullReplicationController())
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for lbls, want := range map[string]bool{"app=web": true, "app=web,x=y": true, "app=api": false, "x=y": false} {
		set, _ := labels.ConvertSelectorToLabelsMap(lbls)
		if got := sel.Matches(set); got != want {
			t.Errorf("selector matches %s = %v, want %v", lbls, got, want)
		}
	}
	if rs.Spec.Template.Labels["tier"] != "fe" || rs.GetUID() != "rc-uid" {
		t.Errorf("template or metadata lost: %+v", rs)
	}
}

// A status computed for a ReplicationController, written and read back,
// must compare equal to the next computation, or every sync would write
// it again.
func TestReplicationControllerStatus_WrittenAndReadBack_IsUnchanged(t *testing.T) {
	full := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web", "tier": "fe"} }
	pods := []*corev1.Pod{mkPod("a", full, readySince(time.Minute)), mkPod("b", full)}
	for _, manageErr := range []error{nil, errors.New("forbidden")} {
		rc := fullReplicationController()
		rc.Status = corev1.ReplicationControllerStatus{}
		kind := &replicationControllers{}
		st := calculateStatus(replicaSetOf(rc), pods, 0, manageErr, now)
		if !kind.countsTerminating() {
			st.TerminatingReplicas = nil
		}
		rs := replicaSetOf(rc)
		rs.Status = st
		written := replicationControllerOf(rs)
		readBack := replicaSetOf(written)
		if !reflect.DeepEqual(readBack.Status, st) {
			t.Errorf("err %v: status read back %+v, computed %+v", manageErr, readBack.Status, st)
		}
		if written.Status.Replicas != 2 || written.Status.ReadyReplicas != 1 || written.Status.FullyLabeledReplicas != 2 {
			t.Errorf("written status = %+v", written.Status)
		}
		if hasFailure := len(written.Status.Conditions) == 1 && written.Status.Conditions[0].Type == corev1.ReplicationControllerReplicaFailure; hasFailure != (manageErr != nil) {
			t.Errorf("err %v: conditions %+v", manageErr, written.Status.Conditions)
		}
	}
}
