package validation

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	// CronJob time zones must validate the same on hosts without tzdata.
	_ "time/tzdata"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	maxParallelismForIndexedJob = 100000
	maxFailedIndexesLimit       = 100000
	maxPodFailurePolicyRules    = 20
	maxExitCodeValues           = 255
	// The controller appends "-<11 digit timestamp>" to job names, and job
	// names must fit into a 63-character label value.
	maxCronJobNameLength = 52
)

var timeZonePartRegexp = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

func validateJob(job *batchv1.Job) field.ErrorList {
	errs := validateMeta(&job.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateGeneratedSelector(job)...)
	return append(errs, validateJobSpecWithSelector(&job.Spec, specPath)...)
}

// validateGeneratedSelector checks that a Job without a manual selector got
// the selector and template labels GenerateJobSelector puts there; they tie
// the job's pods to this job alone.
func validateGeneratedSelector(job *batchv1.Job) field.ErrorList {
	if deref(job.Spec.ManualSelector, false) || job.Spec.Selector == nil {
		return nil
	}
	var errs field.ErrorList
	if job.UID == "" {
		errs = append(errs, field.Required(metaPath.Child("uid"), ""))
	}
	tmplMeta := specPath.Child("template", "metadata")
	expected := map[string]string{
		"controller-uid": string(job.UID), "job-name": job.Name,
		batchv1.ControllerUidLabel: string(job.UID), batchv1.JobNameLabel: job.Name,
	}
	for _, key := range []string{"controller-uid", "job-name", batchv1.ControllerUidLabel, batchv1.JobNameLabel} {
		errs = append(errs, hasLabel(job.Spec.Template.Labels, key, expected[key], tmplMeta)...)
	}
	if sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector); err == nil && !sel.Matches(labels.Set(expected)) {
		errs = append(errs, field.Invalid(specPath.Child("selector"), job.Spec.Selector, "`selector` not auto-generated"))
	}
	return errs
}

func hasLabel(l map[string]string, key, want string, metaPath *field.Path) field.ErrorList {
	p := metaPath.Child("labels").Key(key)
	got, ok := l[key]
	switch {
	case !ok:
		return field.ErrorList{field.Required(p, want)}
	case got != want:
		return field.ErrorList{field.Invalid(p, l, fmt.Sprintf("must be '%s'", want))}
	}
	return nil
}

func validateJobSpecWithSelector(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	errs := validateJobSpec(spec, fldPath)
	if spec.Selector == nil {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	} else {
		errs = append(errs, validateLabelSelector(spec.Selector, fldPath.Child("selector"))...)
	}
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	return errs
}

func validateJobSpec(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *int32
	}{{"parallelism", spec.Parallelism}, {"completions", spec.Completions}, {"backoffLimit", spec.BackoffLimit},
		{"ttlSecondsAfterFinished", spec.TTLSecondsAfterFinished}, {"backoffLimitPerIndex", spec.BackoffLimitPerIndex},
		{"maxFailedIndexes", spec.MaxFailedIndexes}} {
		if f.v != nil {
			errs = append(errs, nonNegative(int64(*f.v), fldPath.Child(f.name))...)
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*spec.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	errs = append(errs, validateCompletionMode(spec, fldPath)...)
	if spec.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(spec, fldPath.Child("podFailurePolicy"))...)
	}
	if p := spec.PodReplacementPolicy; p != nil {
		// A failure policy can only judge pods that have finished failing.
		if spec.PodFailurePolicy != nil {
			if *p != batchv1.Failed {
				errs = append(errs, notSupported(fldPath.Child("podReplacementPolicy"), *p, batchv1.Failed)...)
			}
		} else {
			errs = append(errs, enum(*p, fldPath.Child("podReplacementPolicy"), batchv1.Failed, batchv1.TerminatingOrFailed)...)
		}
	}
	errs = append(errs, validatePodTemplateSpec(&spec.Template, fldPath.Child("template"))...)
	return append(errs, validateJobRestartPolicy(spec, fldPath.Child("template", "spec", "restartPolicy"))...)
}

// validateJobRestartPolicy: a job's pods must be allowed to finish, so
// Always (which the pod defaults would pick) is rejected.
func validateJobRestartPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	rp := spec.Template.Spec.RestartPolicy
	switch {
	case rp == corev1.RestartPolicyAlways || rp == "":
		return field.ErrorList{field.Required(fldPath, fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever))}
	case rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever:
		return notSupported(fldPath, rp, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)
	case spec.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever:
		return field.ErrorList{field.Invalid(fldPath, rp, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever))}
	}
	return nil
}

func validateCompletionMode(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if spec.CompletionMode != nil {
		errs = append(errs, enum(*spec.CompletionMode, fldPath.Child("completionMode"), batchv1.NonIndexedCompletion, batchv1.IndexedCompletion)...)
	}
	if indexed {
		if spec.Completions == nil {
			errs = append(errs, field.Required(fldPath.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
		}
		if spec.Parallelism != nil && *spec.Parallelism > maxParallelismForIndexedJob {
			errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
				fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, batchv1.IndexedCompletion)))
		}
	}
	if spec.BackoffLimitPerIndex != nil && !indexed {
		errs = append(errs, field.Forbidden(fldPath.Child("backoffLimitPerIndex"), "requires indexed completion mode"))
	}
	if m := spec.MaxFailedIndexes; m != nil {
		if spec.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
		if spec.Completions != nil && *m > *spec.Completions {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *m, "must be less than or equal to completions"))
		}
		if *m > maxFailedIndexesLimit {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *m, fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesLimit)))
		}
	}
	if spec.SuccessPolicy != nil && !indexed {
		errs = append(errs, field.Invalid(fldPath.Child("successPolicy"), spec.SuccessPolicy, "requires indexed completion mode"))
	}
	return errs
}

func validatePodFailurePolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := spec.PodFailurePolicy.Rules
	if len(rules) > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxPodFailurePolicyRules))
	}
	containers := sets.New[string]()
	for _, c := range append(spec.Template.Spec.Containers[:len(spec.Template.Spec.Containers):len(spec.Template.Spec.Containers)], spec.Template.Spec.InitContainers...) {
		containers.Insert(c.Name)
	}
	actions := []batchv1.PodFailurePolicyAction{batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex,
		batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore}
	for i := range rules {
		rule, rulePath := &rules[i], rulesPath.Index(i)
		errs = append(errs, enum(rule.Action, rulePath.Child("action"), actions...)...)
		if rule.Action == batchv1.PodFailurePolicyActionFailIndex && spec.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Invalid(rulePath.Child("action"), rule.Action, "requires the backoffLimitPerIndex to be set"))
		}
		if rule.OnExitCodes != nil {
			errs = append(errs, validateOnExitCodes(rule.OnExitCodes, containers, rulePath.Child("onExitCodes"))...)
		}
		for j, c := range rule.OnPodConditions {
			cp := rulePath.Child("onPodConditions").Index(j)
			errs = append(errs, qualifiedName(string(c.Type), cp.Child("type"))...)
			errs = append(errs, enum(c.Status, cp.Child("status"), corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionUnknown)...)
		}
		switch {
		case rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0:
			errs = append(errs, field.Invalid(rulePath, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
		case rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0:
			errs = append(errs, field.Invalid(rulePath, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
		}
	}
	return errs
}

func validateOnExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, containers sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.ContainerName != nil && !containers.Has(*r.ContainerName) {
		errs = append(errs, field.Invalid(fldPath.Child("containerName"), *r.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	errs = append(errs, enum(r.Operator, fldPath.Child("operator"), batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn)...)
	valuesPath := fldPath.Child("values")
	switch {
	case len(r.Values) == 0:
		errs = append(errs, field.Invalid(valuesPath, r.Values, "at least one value is required"))
	case len(r.Values) > maxExitCodeValues:
		errs = append(errs, field.TooMany(valuesPath, len(r.Values), maxExitCodeValues))
	}
	seen := sets.New[int32]()
	for i, v := range r.Values {
		vp := valuesPath.Index(i)
		// Exit code 0 is success; "In [0]" would count successes as failures.
		if v == 0 && r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn {
			errs = append(errs, field.Invalid(vp, v, "must not be 0 for the In operator"))
		}
		if seen.Has(v) {
			errs = append(errs, field.Duplicate(vp, v))
		}
		if i > 0 && r.Values[i-1] > v {
			errs = append(errs, field.Invalid(vp, v, "must be ordered"))
		}
		seen.Insert(v)
	}
	return errs
}

// validateJobUpdate: the template and selector define which pods belong to
// the job, so they are frozen; only a suspended job that never started may
// still be re-aimed at other nodes.
func validateJobUpdate(job, old *batchv1.Job) field.ErrorList {
	errs := validateMetaUpdate(&job.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateJobSpecWithSelector(&job.Spec, specPath)...)
	spec, oldSpec := &job.Spec, &old.Spec
	errs = append(errs, validateCompletionsUpdate(spec, oldSpec)...)
	errs = append(errs, immutable(spec.Selector, oldSpec.Selector, specPath.Child("selector"))...)
	oldTmpl := &oldSpec.Template
	if deref(oldSpec.Suspend, false) && old.Status.StartTime == nil {
		oldTmpl = mutableSchedulingDirectives(&spec.Template, oldTmpl)
	}
	errs = append(errs, immutable(&spec.Template, oldTmpl, specPath.Child("template"))...)
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"completionMode", spec.CompletionMode, oldSpec.CompletionMode}, {"podFailurePolicy", spec.PodFailurePolicy, oldSpec.PodFailurePolicy},
		{"backoffLimitPerIndex", spec.BackoffLimitPerIndex, oldSpec.BackoffLimitPerIndex}, {"managedBy", spec.ManagedBy, oldSpec.ManagedBy},
		{"successPolicy", spec.SuccessPolicy, oldSpec.SuccessPolicy}, {"podReplacementPolicy", spec.PodReplacementPolicy, oldSpec.PodReplacementPolicy},
	} {
		errs = append(errs, immutable(f.new, f.old, specPath.Child(f.name))...)
	}
	return errs
}

// mutableSchedulingDirectives returns the old template with the fields a
// not-yet-started suspended job may change taken from the new one.
func mutableSchedulingDirectives(tmpl, old *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	merged := old.DeepCopy()
	switch {
	case tmpl.Spec.Affinity == nil && merged.Spec.Affinity != nil:
		merged.Spec.Affinity.NodeAffinity = nil
		if *merged.Spec.Affinity == (corev1.Affinity{}) {
			merged.Spec.Affinity = nil
		}
	case tmpl.Spec.Affinity != nil && merged.Spec.Affinity == nil:
		merged.Spec.Affinity = &corev1.Affinity{NodeAffinity: tmpl.Spec.Affinity.NodeAffinity}
	case tmpl.Spec.Affinity != nil:
		merged.Spec.Affinity.NodeAffinity = tmpl.Spec.Affinity.NodeAffinity
	}
	merged.Spec.NodeSelector = tmpl.Spec.NodeSelector
	merged.Spec.Tolerations = tmpl.Spec.Tolerations
	merged.Annotations = tmpl.Annotations
	merged.Labels = tmpl.Labels
	merged.Spec.SchedulingGates = tmpl.Spec.SchedulingGates
	return merged
}

// validateCompletionsUpdate: an indexed job may be scaled by changing
// completions and parallelism together; otherwise completions are fixed.
func validateCompletionsUpdate(spec, old *batchv1.JobSpec) field.ErrorList {
	p := specPath.Child("completions")
	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if !indexed {
		return immutable(spec.Completions, old.Completions, p)
	}
	if semanticEqual(spec.Completions, old.Completions) || spec.Completions == nil {
		return nil
	}
	if spec.Parallelism == nil || *spec.Completions != *spec.Parallelism {
		return field.ErrorList{field.Invalid(p, spec.Completions, "can only be modified in tandem with spec.parallelism")}
	}
	return nil
}

func validateCronJob(cj *batchv1.CronJob) field.ErrorList {
	errs := validateMeta(&cj.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateCronJobSpec(&cj.Spec, nil)...)
	if len(cj.Name) > maxCronJobNameLength {
		errs = append(errs, field.Invalid(metaPath.Child("name"), cj.Name, fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	return errs
}

// validateCronJobSpec validates a cron job spec; old is nil on create.
func validateCronJobSpec(spec, old *batchv1.CronJobSpec) field.ErrorList {
	var errs field.ErrorList
	schedPath := specPath.Child("schedule")
	if spec.Schedule == "" {
		errs = append(errs, field.Required(schedPath, ""))
	} else {
		if err := parseCronSchedule(spec.Schedule); err != nil {
			errs = append(errs, field.Invalid(schedPath, spec.Schedule, err.Error()))
		}
		// TZ in the schedule is only tolerated on objects that already had it.
		allowTZ := old != nil && strings.Contains(old.Schedule, "TZ")
		switch {
		case allowTZ && strings.Contains(spec.Schedule, "TZ") && spec.TimeZone != nil:
			errs = append(errs, field.Invalid(schedPath, spec.Schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
		case !allowTZ && strings.Contains(spec.Schedule, "TZ"):
			errs = append(errs, field.Invalid(schedPath, spec.Schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
		}
	}
	if spec.StartingDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*spec.StartingDeadlineSeconds, specPath.Child("startingDeadlineSeconds"))...)
	}
	if old == nil || deref(old.TimeZone, "\x00") != deref(spec.TimeZone, "\x00") {
		errs = append(errs, validateTimeZone(spec.TimeZone, specPath.Child("timeZone"))...)
	}
	errs = append(errs, enum(spec.ConcurrencyPolicy, specPath.Child("concurrencyPolicy"),
		batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent)...)
	errs = append(errs, validateJobTemplate(&spec.JobTemplate, specPath.Child("jobTemplate"))...)
	if l := spec.SuccessfulJobsHistoryLimit; l != nil {
		errs = append(errs, nonNegative(int64(*l), specPath.Child("successfulJobsHistoryLimit"))...)
	}
	if l := spec.FailedJobsHistoryLimit; l != nil {
		errs = append(errs, nonNegative(int64(*l), specPath.Child("failedJobsHistoryLimit"))...)
	}
	return errs
}

// validateJobTemplate: jobs made from a template always get a generated
// selector, so the template may not bring its own.
func validateJobTemplate(t *batchv1.JobTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := validateJobSpec(&t.Spec, fldPath.Child("spec"))
	if t.Spec.Selector != nil {
		errs = append(errs, field.Invalid(fldPath.Child("spec", "selector"), t.Spec.Selector, "`selector` will be auto-generated"))
	}
	if deref(t.Spec.ManualSelector, false) {
		errs = append(errs, field.NotSupported(fldPath.Child("spec", "manualSelector"), t.Spec.ManualSelector, []string{"nil", "false"}))
	}
	return errs
}

func validateTimeZone(tz *string, fldPath *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(fldPath, tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !timeZonePartRegexp.MatchString(part) {
			return field.ErrorList{field.Invalid(fldPath, tz, fmt.Sprintf("unknown time zone %s", *tz))}
		}
	}
	// "Local" would mean the API server's zone, which differs between hosts.
	if strings.EqualFold(*tz, "Local") {
		return field.ErrorList{field.Invalid(fldPath, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		return field.ErrorList{field.Invalid(fldPath, tz, err.Error())}
	}
	return nil
}

func validateCronJobUpdate(cj, old *batchv1.CronJob) field.ErrorList {
	errs := validateMetaUpdate(&cj.ObjectMeta, &old.ObjectMeta)
	// The name length limit is skipped so that old long-named jobs stay editable.
	return append(errs, validateCronJobSpec(&cj.Spec, &old.Spec)...)
}
