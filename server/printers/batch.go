package printers

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

func jobPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", "Status of the job."),
			column("Completions", "string", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
			column("Duration", "string", "Time required to complete the job."),
			ageColumn(),
			wideColumn("Containers", "string", containersDescription),
			wideColumn("Images", "string", imagesDescription),
			wideColumn("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"]),
		},
		Cells: jobCells,
	}
}

func jobCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	job, err := typed[batchv1.Job](obj)
	if err != nil {
		return nil, err
	}
	var jobDuration string
	switch {
	case job.Status.StartTime == nil:
	case job.Status.CompletionTime == nil:
		jobDuration = duration.HumanDuration(now.Sub(job.Status.StartTime.Time))
	default:
		jobDuration = duration.HumanDuration(job.Status.CompletionTime.Sub(job.Status.StartTime.Time))
	}
	names, images := layoutContainerCells(job.Spec.Template.Spec.Containers)
	return []interface{}{
		job.Name,
		jobStatus(job),
		jobCompletions(job),
		jobDuration,
		translateTimestampSince(job.CreationTimestamp, now),
		names,
		images,
		metav1.FormatLabelSelector(job.Spec.Selector),
	}, nil
}

// jobCompletions is succeeded/completions; a job without a completion count
// needs one success, shown with its parallelism when that is above one.
func jobCompletions(job *batchv1.Job) string {
	if job.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", job.Status.Succeeded, *job.Spec.Completions)
	}
	if p := derefInt32(job.Spec.Parallelism); p > 1 {
		return fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, p)
	}
	return fmt.Sprintf("%d/1", job.Status.Succeeded)
}

// jobStatus checks the conditions in upstream's order of precedence.
func jobStatus(job *batchv1.Job) string {
	switch {
	case hasJobCondition(job, batchv1.JobComplete):
		return "Complete"
	case hasJobCondition(job, batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case hasJobCondition(job, batchv1.JobSuspended):
		return "Suspended"
	case hasJobCondition(job, batchv1.JobFailureTarget):
		return "FailureTarget"
	}
	return "Running"
}

// hasJobCondition looks only at the first condition of the type.
func hasJobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func cronJobPrinter() Printer {
	spec := batchv1beta1.CronJobSpec{}.SwaggerDoc()
	status := batchv1beta1.CronJobStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Schedule", "string", spec["schedule"]),
			column("Timezone", "string", spec["timeZone"]),
			column("Suspend", "boolean", spec["suspend"]),
			column("Active", "integer", status["active"]),
			column("Last Schedule", "string", status["lastScheduleTime"]),
			ageColumn(),
			wideColumn("Containers", "string", containersDescription),
			wideColumn("Images", "string", imagesDescription),
			wideColumn("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"]),
		},
		Cells: cronJobCells,
	}
}

func cronJobCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	cj, err := typed[batchv1.CronJob](obj)
	if err != nil {
		return nil, err
	}
	lastSchedule := "<none>"
	if cj.Status.LastScheduleTime != nil {
		lastSchedule = translateTimestampSince(*cj.Status.LastScheduleTime, now)
	}
	timeZone := "<none>"
	if cj.Spec.TimeZone != nil {
		timeZone = *cj.Spec.TimeZone
	}
	tmpl := cj.Spec.JobTemplate.Spec
	names, images := layoutContainerCells(tmpl.Template.Spec.Containers)
	return []interface{}{
		cj.Name,
		cj.Spec.Schedule,
		timeZone,
		// A string even though the column says boolean, as upstream.
		printBoolPtr(cj.Spec.Suspend),
		int64(len(cj.Status.Active)),
		lastSchedule,
		translateTimestampSince(cj.CreationTimestamp, now),
		names,
		images,
		metav1.FormatLabelSelector(tmpl.Selector),
	}, nil
}
