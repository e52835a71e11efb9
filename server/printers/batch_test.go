package printers

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

func jobCondition(t batchv1.JobConditionType, s corev1.ConditionStatus) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: s}
}

func TestJobColumns(t *testing.T) {
	p, _ := For(jobKind)
	if got, want := header(p), "Name;Status;Completions;Duration;Age;*Containers;*Images;*Selector"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
}

func TestJobCells(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u1"}}
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pi", Image: "perl"}}}}
	tests := []struct {
		name string
		job  func() *batchv1.Job
		want []interface{}
	}{
		{"complete job", func() *batchv1.Job {
			return &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour),
				Spec: batchv1.JobSpec{Completions: ptr(int32(3)), Selector: sel, Template: tmpl},
				Status: batchv1.JobStatus{Succeeded: 3, StartTime: agoPtr(50 * time.Minute), CompletionTime: agoPtr(45 * time.Minute),
					Conditions: []batchv1.JobCondition{jobCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue), jobCondition(batchv1.JobComplete, corev1.ConditionTrue)}}}
		}, []interface{}{"pi", "Complete", "3/3", "5m", "60m", "pi", "perl", "batch.kubernetes.io/controller-uid=u1"}},
		{"running job with parallelism", func() *batchv1.Job {
			return &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour),
				Spec:   batchv1.JobSpec{Parallelism: ptr(int32(4)), Template: tmpl},
				Status: batchv1.JobStatus{StartTime: agoPtr(90 * time.Second)}}
		}, []interface{}{"pi", "Running", "0/1 of 4", "90s", "60m", "pi", "perl", "<none>"}},
		{"not started", func() *batchv1.Job {
			return &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour), Spec: batchv1.JobSpec{Parallelism: ptr(int32(1))}}
		}, []interface{}{"pi", "Running", "0/1", "", "60m", "", "", "<none>"}},
		{"failed job", func() *batchv1.Job {
			return &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour), Spec: batchv1.JobSpec{Completions: ptr(int32(1))},
				Status: batchv1.JobStatus{Failed: 6, Conditions: []batchv1.JobCondition{jobCondition(batchv1.JobFailureTarget, corev1.ConditionTrue), jobCondition(batchv1.JobFailed, corev1.ConditionTrue)}}}
		}, []interface{}{"pi", "Failed", "0/1", "", "60m", "", "", "<none>"}},
		{"failure target before failed", func() *batchv1.Job {
			return &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour), Spec: batchv1.JobSpec{Completions: ptr(int32(1))},
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{jobCondition(batchv1.JobFailureTarget, corev1.ConditionTrue)}}}
		}, []interface{}{"pi", "FailureTarget", "0/1", "", "60m", "", "", "<none>"}},
		{"suspended job", func() *batchv1.Job {
			return &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour), Spec: batchv1.JobSpec{Completions: ptr(int32(2))},
				Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{jobCondition(batchv1.JobSuspended, corev1.ConditionTrue)}}}
		}, []interface{}{"pi", "Suspended", "1/2", "", "60m", "", "", "<none>"}},
		{"job being deleted", func() *batchv1.Job {
			j := &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour), Spec: batchv1.JobSpec{Completions: ptr(int32(2))},
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{jobCondition(batchv1.JobSuspended, corev1.ConditionTrue)}}}
			j.DeletionTimestamp = agoPtr(time.Second)
			return j
		}, []interface{}{"pi", "Terminating", "0/2", "", "60m", "", "", "<none>"}},
		{"false complete condition is still running", func() *batchv1.Job {
			return &batchv1.Job{ObjectMeta: objMeta("pi", time.Hour), Spec: batchv1.JobSpec{Completions: ptr(int32(1))},
				Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{jobCondition(batchv1.JobComplete, corev1.ConditionFalse), jobCondition(batchv1.JobComplete, corev1.ConditionTrue)}}}
		}, []interface{}{"pi", "Running", "0/1", "", "60m", "", "", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, jobKind, tt.job(), tt.want)
		})
	}
}

func TestCronJobCells(t *testing.T) {
	gk := schema.GroupKind{Group: "batch", Kind: "CronJob"}
	p, _ := For(gk)
	if got, want := header(p), "Name;Schedule;Timezone;Suspend;Active;Last Schedule;Age;*Containers;*Images;*Selector"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	tests := []struct {
		name string
		cj   *batchv1.CronJob
		want []interface{}
	}{
		{"scheduled cron job", &batchv1.CronJob{ObjectMeta: objMeta("backup", 48*time.Hour),
			Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", TimeZone: ptr("Europe/Paris"), Suspend: ptr(false),
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "b", Image: "restic"}}}}}}},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "backup-1"}}, LastScheduleTime: agoPtr(4 * time.Minute)}},
			[]interface{}{"backup", "*/5 * * * *", "Europe/Paris", "False", int64(1), "4m", "2d", "b", "restic", "<none>"}},
		{"never scheduled, suspend unset", &batchv1.CronJob{ObjectMeta: objMeta("c", time.Hour), Spec: batchv1.CronJobSpec{Schedule: "@daily"}},
			[]interface{}{"c", "@daily", "<none>", "<unset>", int64(0), "<none>", "60m", "", "", "<none>"}},
		{"suspended", &batchv1.CronJob{ObjectMeta: objMeta("c", time.Hour), Spec: batchv1.CronJobSpec{Schedule: "@daily", Suspend: ptr(true)}},
			[]interface{}{"c", "@daily", "<none>", "True", int64(0), "<none>", "60m", "", "", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertCells(t, gk, tt.cj, tt.want)
		})
	}
}
