package defaults

import (
	"maps"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The unprefixed job labels predate batch.kubernetes.io/; upstream still sets
// both so that older tooling keeps finding a job's pods.
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

func setDeployment(d *appsv1.Deployment) {
	spec := &d.Spec
	if spec.Replicas == nil {
		spec.Replicas = new(int32(1))
	}
	if spec.Strategy.Type == "" {
		spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if spec.Strategy.RollingUpdate == nil {
			spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		ru := spec.Strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = new(intstr.FromString("25%"))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = new(intstr.FromString("25%"))
		}
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = new(int32(10))
	}
	if spec.ProgressDeadlineSeconds == nil {
		spec.ProgressDeadlineSeconds = new(int32(600))
	}
	setPodSpec(&spec.Template.Spec)
}

func setReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = new(int32(1))
	}
	setPodSpec(&rs.Spec.Template.Spec)
}

func setStatefulSet(ss *appsv1.StatefulSet) {
	spec := &ss.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	// An explicit RollingUpdate type without parameters stays without them,
	// exactly as upstream leaves it.
	if ru := spec.UpdateStrategy.RollingUpdate; spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		ru != nil && ru.Partition == nil {
		ru.Partition = new(int32(0))
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	policy := spec.PersistentVolumeClaimRetentionPolicy
	if policy.WhenDeleted == "" {
		policy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if policy.WhenScaled == "" {
		policy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		spec.Replicas = new(int32(1))
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = new(int32(10))
	}
	setPodSpec(&spec.Template.Spec)
	for i := range spec.VolumeClaimTemplates {
		setPVC(&spec.VolumeClaimTemplates[i])
	}
}

func setDaemonSet(ds *appsv1.DaemonSet) {
	us := &ds.Spec.UpdateStrategy
	if us.Type == "" {
		us.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if us.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if us.RollingUpdate == nil {
			us.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if us.RollingUpdate.MaxUnavailable == nil {
			us.RollingUpdate.MaxUnavailable = new(intstr.FromInt32(1))
		}
		if us.RollingUpdate.MaxSurge == nil {
			us.RollingUpdate.MaxSurge = new(intstr.FromInt32(0))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = new(int32(10))
	}
	setPodSpec(&ds.Spec.Template.Spec)
}

func setJob(job *batchv1.Job) {
	spec := &job.Spec
	// A job that states neither count is a single pod run to completion.
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = new(int32(1))
	}
	if spec.Parallelism == nil {
		spec.Parallelism = new(int32(1))
	}
	if spec.BackoffLimit == nil {
		// With per-index limits the global limit must not cut the job short.
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = new(int32(math.MaxInt32))
		} else {
			spec.BackoffLimit = new(int32(6))
		}
	}
	if spec.Template.Labels != nil && len(job.Labels) == 0 {
		job.Labels = maps.Clone(spec.Template.Labels)
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = new(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = new(false)
	}
	if spec.PodReplacementPolicy == nil {
		// A pod failure policy can only judge pods that have fully failed.
		if spec.PodFailurePolicy != nil {
			spec.PodReplacementPolicy = new(batchv1.Failed)
		} else {
			spec.PodReplacementPolicy = new(batchv1.TerminatingOrFailed)
		}
	}
	setJobSpecCommon(spec)
	// A new job that already has its UID is being created by the server,
	// which is exactly when upstream's strategy generates the selector.
	if job.UID != "" && job.ResourceVersion == "" {
		GenerateJobSelector(job)
	}
}

// setJobSpecCommon holds the type-level defaults that also apply inside a
// CronJob's job template (the Job-level ones above do not).
func setJobSpecCommon(spec *batchv1.JobSpec) {
	if pfp := spec.PodFailurePolicy; pfp != nil {
		for i := range pfp.Rules {
			conds := pfp.Rules[i].OnPodConditions
			for j := range conds {
				if conds[j].Status == "" {
					conds[j].Status = corev1.ConditionTrue
				}
			}
		}
	}
	setPodSpec(&spec.Template.Spec)
}

func setCronJob(cj *batchv1.CronJob) {
	spec := &cj.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if spec.Suspend == nil {
		spec.Suspend = new(false)
	}
	if spec.SuccessfulJobsHistoryLimit == nil {
		spec.SuccessfulJobsHistoryLimit = new(int32(3))
	}
	if spec.FailedJobsHistoryLimit == nil {
		spec.FailedJobsHistoryLimit = new(int32(1))
	}
	setJobSpecCommon(&spec.JobTemplate.Spec)
}

// GenerateJobSelector does what upstream's Job create strategy does before
// validation: unless the user asked for a manual selector, it labels the pod
// template with the job's name and UID and selects on the UID. Apply calls it
// for a job that has a UID but no resourceVersion (a create after the server
// assigned the UID); call it directly when defaulting happens before the UID
// is known. validation.Validate rejects a Job whose selector was not
// generated this way.
func GenerateJobSelector(job *batchv1.Job) {
	if job.Spec.ManualSelector == nil {
		job.Spec.ManualSelector = new(false)
	}
	if *job.Spec.ManualSelector {
		return
	}
	tmpl := &job.Spec.Template
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	// Labels the user already set are kept; validation reports a conflict.
	for _, key := range []string{legacyJobNameLabel, batchv1.JobNameLabel} {
		if _, ok := tmpl.Labels[key]; !ok {
			tmpl.Labels[key] = job.Name
		}
	}
	for _, key := range []string{legacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if _, ok := tmpl.Labels[key]; !ok {
			tmpl.Labels[key] = string(job.UID)
		}
	}
	if job.Spec.Selector == nil {
		job.Spec.Selector = &metav1.LabelSelector{}
	}
	if job.Spec.Selector.MatchLabels == nil {
		job.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !ok {
		job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(job.UID)
	}
}
