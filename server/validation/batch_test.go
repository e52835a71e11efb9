package validation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"skiff/server/defaults"
)

func validJob() *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: objMeta("backup"), Spec: batchv1.JobSpec{Template: podTemplate(nil)}}
	job.UID = "0f3c1d2e-aaaa-bbbb-cccc-000000000001"
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	defaults.Apply(job)
	defaults.GenerateJobSelector(job)
	return job
}

func TestValidateJob(t *testing.T) {
	runCreateCases(t, validJob, []errCase[*batchv1.Job]{
		{"restart policy must be set for jobs", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			field.ErrorTypeRequired, "spec.template.spec.restartPolicy", `valid values: "OnFailure", "Never"`},
		{"selector required", func(j *batchv1.Job) { j.Spec.Selector = nil }, field.ErrorTypeRequired, "spec.selector", ""},
		{"generated labels must carry the job's uid", func(j *batchv1.Job) { j.Spec.Template.Labels[batchv1.ControllerUidLabel] = "someone-else" },
			field.ErrorTypeInvalid, "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]", "must be '0f3c1d2e"},
		{"manual selector must match template", func(j *batchv1.Job) {
			j.Spec.ManualSelector = new(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
		}, field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"},
		{"parallelism not negative", func(j *batchv1.Job) { j.Spec.Parallelism = new(int32(-1)) }, field.ErrorTypeInvalid, "spec.parallelism", ""},
		{"backoff limit not negative", func(j *batchv1.Job) { j.Spec.BackoffLimit = new(int32(-1)) }, field.ErrorTypeInvalid, "spec.backoffLimit", ""},
		{"completion mode enum", func(j *batchv1.Job) { j.Spec.CompletionMode = new(batchv1.CompletionMode("Sorted")) },
			field.ErrorTypeNotSupported, "spec.completionMode", ""},
		{"indexed jobs need completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
			j.Spec.Completions = nil
		}, field.ErrorTypeRequired, "spec.completions", "when completion mode is Indexed"},
		{"pod failure policy requires restart Never", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}}}}
			j.Spec.PodReplacementPolicy = new(batchv1.Failed)
		}, field.ErrorTypeInvalid, "spec.template.spec.restartPolicy", `only "Never" is supported when podFailurePolicy is specified`},
		{"exit code 0 not usable with In", func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			j.Spec.PodReplacementPolicy = new(batchv1.Failed)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{0}}}}}
		}, field.ErrorTypeInvalid, "spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "must not be 0 for the In operator"},
		{"replacement policy Failed with a failure policy", func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}}}
		}, field.ErrorTypeNotSupported, "spec.podReplacementPolicy", ""},
	})
}

func TestValidateJobUpdate(t *testing.T) {
	storedJob := func() *batchv1.Job { return stored(validJob()) }
	runUpdateCases(t, storedJob, []updateCase[*batchv1.Job]{
		{"parallelism may change", func(j *batchv1.Job) { j.Spec.Parallelism = new(int32(3)) }, "", "", ""},
		{"suspend may change", func(j *batchv1.Job) { j.Spec.Suspend = new(true) }, "", "", ""},
		{"selector is immutable", func(j *batchv1.Job) {
			j.Spec.Selector.MatchLabels["extra"] = "x"
			j.Spec.Template.Labels["extra"] = "x"
		},
			field.ErrorTypeInvalid, "spec.selector", "field is immutable"},
		{"template is immutable", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "busybox" },
			field.ErrorTypeInvalid, "spec.template", "field is immutable"},
		{"completions are immutable", func(j *batchv1.Job) { j.Spec.Completions = new(int32(3)) },
			field.ErrorTypeInvalid, "spec.completions", "field is immutable"},
	})
	suspended := func() *batchv1.Job {
		j := storedJob()
		j.Spec.Suspend = new(true)
		return j
	}
	runUpdateCases(t, suspended, []updateCase[*batchv1.Job]{
		{"unstarted suspended job may be re-aimed", func(j *batchv1.Job) {
			j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "batch"}
		}, "", "", ""},
	})
}

func validCronJob() *batchv1.CronJob {
	tmpl := podTemplate(nil)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return defaulted(&batchv1.CronJob{ObjectMeta: objMeta("nightly"), Spec: batchv1.CronJobSpec{
		Schedule: "30 2 * * mon-fri", TimeZone: new("Europe/Berlin"),
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}},
	}})
}

func TestValidateCronJob(t *testing.T) {
	runCreateCases(t, validCronJob, []errCase[*batchv1.CronJob]{
		{"schedule required", func(c *batchv1.CronJob) { c.Spec.Schedule = "" }, field.ErrorTypeRequired, "spec.schedule", ""},
		{"schedule needs five fields", func(c *batchv1.CronJob) { c.Spec.Schedule = "* * *" },
			field.ErrorTypeInvalid, "spec.schedule", "expected exactly 5 fields, found 3"},
		{"minute range", func(c *batchv1.CronJob) { c.Spec.Schedule = "0-70 * * * *" },
			field.ErrorTypeInvalid, "spec.schedule", "end of range (70) above maximum (59)"},
		{"TZ belongs in timeZone", func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 * * * *"; c.Spec.TimeZone = nil },
			field.ErrorTypeInvalid, "spec.schedule", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"},
		{"time zone must exist", func(c *batchv1.CronJob) { c.Spec.TimeZone = new("Mars/Olympus") },
			field.ErrorTypeInvalid, "spec.timeZone", "unknown time zone"},
		{"time zone must be explicit", func(c *batchv1.CronJob) { c.Spec.TimeZone = new("Local") },
			field.ErrorTypeInvalid, "spec.timeZone", "must be an explicit time zone"},
		{"concurrency policy enum", func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Queue" },
			field.ErrorTypeNotSupported, "spec.concurrencyPolicy", ""},
		{"job template restart policy", func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		},
			field.ErrorTypeRequired, "spec.jobTemplate.spec.template.spec.restartPolicy", ""},
		{"job template selector is generated", func(c *batchv1.CronJob) { c.Spec.JobTemplate.Spec.Selector = webSelector() },
			field.ErrorTypeInvalid, "spec.jobTemplate.spec.selector", "`selector` will be auto-generated"},
		{"name leaves room for the job suffix", func(c *batchv1.CronJob) { c.Name = strings.Repeat("n", 53) },
			field.ErrorTypeInvalid, "metadata.name", "must be no more than 52 characters"},
		{"history limits not negative", func(c *batchv1.CronJob) { c.Spec.FailedJobsHistoryLimit = new(int32(-1)) },
			field.ErrorTypeInvalid, "spec.failedJobsHistoryLimit", ""},
	})
}

func TestParseCronSchedule(t *testing.T) {
	for _, s := range []string{
		"* * * * *", "*/15 * * * *", "0 0 1 1 *", "0 9-17/2 * * MON-FRI", "5,10,15 0 * jan,jul sun",
		"0 0 ? * *", "30 4 1-31/7 * 0-6", "@hourly", "@daily", "@yearly", "@every 90m", "0 12 * * SAT",
		"CRON_TZ=Asia/Tokyo 0 9 * * *",
	} {
		t.Run("accepts "+s, func(t *testing.T) {
			if err := parseCronSchedule(s); err != nil {
				t.Fatalf("parseCronSchedule(%q) = %v, want nil", s, err)
			}
		})
	}
	for s, want := range map[string]string{
		"":              "empty spec string",
		"* * * *":       "expected exactly 5 fields, found 4",
		"60 * * * *":    "end of range (60) above maximum (59)",
		"* 24 * * *":    "end of range (24) above maximum (23)",
		"* * 0 * *":     "beginning of range (0) below minimum (1)",
		"* * * 13 *":    "end of range (13) above maximum (12)",
		"* * * * 7":     "end of range (7) above maximum (6)",
		"*/0 * * * *":   "step of range should be a positive number",
		"5-1 * * * *":   "beginning of range (5) beyond end of range (1)",
		"1-2-3 * * * *": "too many hyphens",
		"*/2/3 * * * *": "too many slashes",
		"x * * * *":     "failed to parse int from x",
		"* * * foo *":   "failed to parse int from foo",
		"@fortnightly":  "unrecognized descriptor",
		"@every fast":   "failed to parse duration",
	} {
		t.Run("rejects "+s, func(t *testing.T) {
			err := parseCronSchedule(s)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("parseCronSchedule(%q) = %v, want error containing %q", s, err, want)
			}
		})
	}
}
