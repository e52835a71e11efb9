package defaults

import (
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// expect compares a defaulted field with upstream's value.
func expect(t *testing.T, name string, got, want any) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", name, got, want)
	}
}

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.25"}}},
	}
}

func TestServiceDefaults(t *testing.T) {
	t.Run("cluster IP service", func(t *testing.T) {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		Apply(svc)
		expect(t, "type", svc.Spec.Type, corev1.ServiceTypeClusterIP)
		expect(t, "sessionAffinity", svc.Spec.SessionAffinity, corev1.ServiceAffinityNone)
		expect(t, "port protocol", svc.Spec.Ports[0].Protocol, corev1.ProtocolTCP)
		expect(t, "targetPort", svc.Spec.Ports[0].TargetPort, intstr.FromInt32(80))
		expect(t, "internalTrafficPolicy", svc.Spec.InternalTrafficPolicy, new(corev1.ServiceInternalTrafficPolicyCluster))
		expect(t, "externalTrafficPolicy", svc.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicy(""))
		expect(t, "clusterIP left to the allocator", svc.Spec.ClusterIP, "")
	})
	t.Run("load balancer service", func(t *testing.T) {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP}}
		Apply(svc)
		expect(t, "externalTrafficPolicy", svc.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicyCluster)
		expect(t, "allocateLoadBalancerNodePorts", svc.Spec.AllocateLoadBalancerNodePorts, new(true))
		expect(t, "client IP timeout", svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, new(int32(10800)))
	})
	t.Run("external name service gets no traffic policies", func(t *testing.T) {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}
		Apply(svc)
		if svc.Spec.InternalTrafficPolicy != nil || svc.Spec.ExternalTrafficPolicy != "" {
			t.Fatalf("ExternalName service got traffic policies: %+v", svc.Spec)
		}
	})
}

func TestWorkloadDefaults(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: template()}}
	Apply(d)
	expect(t, "deployment replicas", d.Spec.Replicas, new(int32(1)))
	expect(t, "deployment strategy", d.Spec.Strategy, appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: new(intstr.FromString("25%")), MaxSurge: new(intstr.FromString("25%"))}})
	expect(t, "deployment revisionHistoryLimit", d.Spec.RevisionHistoryLimit, new(int32(10)))
	expect(t, "deployment progressDeadlineSeconds", d.Spec.ProgressDeadlineSeconds, new(int32(600)))
	expect(t, "deployment template restartPolicy", d.Spec.Template.Spec.RestartPolicy, corev1.RestartPolicyAlways)

	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: template()}}
	Apply(rs)
	expect(t, "replicaset replicas", rs.Spec.Replicas, new(int32(1)))

	ss := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: template(),
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
	Apply(ss)
	expect(t, "statefulset replicas", ss.Spec.Replicas, new(int32(1)))
	expect(t, "statefulset podManagementPolicy", ss.Spec.PodManagementPolicy, appsv1.OrderedReadyPodManagement)
	expect(t, "statefulset updateStrategy", ss.Spec.UpdateStrategy, appsv1.StatefulSetUpdateStrategy{
		Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(int32(0))}})
	expect(t, "statefulset revisionHistoryLimit", ss.Spec.RevisionHistoryLimit, new(int32(10)))
	expect(t, "statefulset pvc retention", ss.Spec.PersistentVolumeClaimRetentionPolicy, &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType})
	expect(t, "claim template volumeMode", ss.Spec.VolumeClaimTemplates[0].Spec.VolumeMode, new(corev1.PersistentVolumeFilesystem))
	expect(t, "claim template phase", ss.Spec.VolumeClaimTemplates[0].Status.Phase, corev1.ClaimPending)

	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: template()}}
	Apply(ds)
	expect(t, "daemonset updateStrategy", ds.Spec.UpdateStrategy, appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: new(intstr.FromInt32(1)), MaxSurge: new(intstr.FromInt32(0))}})
	expect(t, "daemonset revisionHistoryLimit", ds.Spec.RevisionHistoryLimit, new(int32(10)))

	rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: new(template())}}
	Apply(rc)
	expect(t, "rc replicas", rc.Spec.Replicas, new(int32(1)))
	expect(t, "rc selector from template labels", rc.Spec.Selector, map[string]string{"app": "web"})
	expect(t, "rc labels from template labels", rc.Labels, map[string]string{"app": "web"})
}

func TestStatefulSetExplicitRollingUpdateWithoutParameters(t *testing.T) {
	ss := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}}}
	Apply(ss)
	if ss.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Fatal("upstream leaves rollingUpdate nil when only the type is given")
	}
}

func TestBatchDefaults(t *testing.T) {
	job := &batchv1.Job{Spec: batchv1.JobSpec{Template: template()}}
	Apply(job)
	expect(t, "completions", job.Spec.Completions, new(int32(1)))
	expect(t, "parallelism", job.Spec.Parallelism, new(int32(1)))
	expect(t, "backoffLimit", job.Spec.BackoffLimit, new(int32(6)))
	expect(t, "completionMode", job.Spec.CompletionMode, new(batchv1.NonIndexedCompletion))
	expect(t, "suspend", job.Spec.Suspend, new(false))
	expect(t, "podReplacementPolicy", job.Spec.PodReplacementPolicy, new(batchv1.TerminatingOrFailed))
	expect(t, "job labels from template", job.Labels, map[string]string{"app": "web"})

	parallel := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: new(int32(4)), BackoffLimitPerIndex: new(int32(1)),
		PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}}}}}}
	Apply(parallel)
	expect(t, "work-queue completions stay unset", parallel.Spec.Completions, (*int32)(nil))
	expect(t, "backoffLimit with per-index limit", parallel.Spec.BackoffLimit, new(int32(math.MaxInt32)))
	expect(t, "podReplacementPolicy with failure policy", parallel.Spec.PodReplacementPolicy, new(batchv1.Failed))
	expect(t, "pod condition status", parallel.Spec.PodFailurePolicy.Rules[0].OnPodConditions[0].Status, corev1.ConditionTrue)

	cj := &batchv1.CronJob{Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template()}}}}
	Apply(cj)
	expect(t, "concurrencyPolicy", cj.Spec.ConcurrencyPolicy, batchv1.AllowConcurrent)
	expect(t, "cronjob suspend", cj.Spec.Suspend, new(false))
	expect(t, "successfulJobsHistoryLimit", cj.Spec.SuccessfulJobsHistoryLimit, new(int32(3)))
	expect(t, "failedJobsHistoryLimit", cj.Spec.FailedJobsHistoryLimit, new(int32(1)))
	expect(t, "job template pod defaults", cj.Spec.JobTemplate.Spec.Template.Spec.DNSPolicy, corev1.DNSClusterFirst)
	expect(t, "job template keeps job-level fields unset", cj.Spec.JobTemplate.Spec.BackoffLimit, (*int32)(nil))
}

func TestGenerateJobSelector(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "backup", UID: "uid-1"}, Spec: batchv1.JobSpec{Template: template()}}
	GenerateJobSelector(job)
	expect(t, "manualSelector", job.Spec.ManualSelector, new(false))
	expect(t, "selector", job.Spec.Selector, &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "uid-1"}})
	expect(t, "template labels", job.Spec.Template.Labels, map[string]string{
		"app": "web", "job-name": "backup", "controller-uid": "uid-1",
		batchv1.JobNameLabel: "backup", batchv1.ControllerUidLabel: "uid-1",
	})

	manual := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "uid-2"}, Spec: batchv1.JobSpec{ManualSelector: new(true), Template: template()}}
	GenerateJobSelector(manual)
	if manual.Spec.Selector != nil || len(manual.Spec.Template.Labels) != 1 {
		t.Fatalf("manual selector job was changed: %+v", manual.Spec)
	}
}

func TestCoreObjectDefaults(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", CreationTimestamp: metav1.Now()}}
	Apply(ns)
	expect(t, "namespace phase", ns.Status.Phase, corev1.NamespaceActive)
	expect(t, "namespace finalizers", ns.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes})
	expect(t, "namespace name label", ns.Labels, map[string]string{corev1.LabelMetadataName: "team-a"})

	storedNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", ResourceVersion: "5"}}
	Apply(storedNS)
	expect(t, "stored namespace finalizers are not re-added", storedNS.Spec.Finalizers, []corev1.FinalizerName(nil))

	secret := &corev1.Secret{}
	Apply(secret)
	expect(t, "secret type", secret.Type, corev1.SecretTypeOpaque)

	pvc := &corev1.PersistentVolumeClaim{}
	Apply(pvc)
	expect(t, "pvc volumeMode", pvc.Spec.VolumeMode, new(corev1.PersistentVolumeFilesystem))
	expect(t, "pvc phase", pvc.Status.Phase, corev1.ClaimPending)

	pv := &corev1.PersistentVolume{}
	Apply(pv)
	expect(t, "pv reclaim policy", pv.Spec.PersistentVolumeReclaimPolicy, corev1.PersistentVolumeReclaimRetain)
	expect(t, "pv volumeMode", pv.Spec.VolumeMode, new(corev1.PersistentVolumeFilesystem))
	expect(t, "pv phase", pv.Status.Phase, corev1.VolumePending)

	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}}}}
	Apply(ep)
	expect(t, "endpoints port protocol", ep.Subsets[0].Ports[0].Protocol, corev1.ProtocolTCP)

	node := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	Apply(node)
	expect(t, "node allocatable from capacity", node.Status.Allocatable, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")})

	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
		Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Min: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
	Apply(lr)
	item := lr.Spec.Limits[0]
	expect(t, "limit range default from max", item.Default, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")})
	expect(t, "limit range default request", item.DefaultRequest, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("64Mi")})
}

func TestOtherGroupDefaults(t *testing.T) {
	np := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
		Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}}}}
	Apply(np)
	expect(t, "policy types", np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress})
	expect(t, "policy port protocol", np.Spec.Egress[0].Ports[0].Protocol, new(corev1.ProtocolTCP))

	sc := &storagev1.StorageClass{}
	Apply(sc)
	expect(t, "reclaimPolicy", sc.ReclaimPolicy, new(corev1.PersistentVolumeReclaimDelete))
	expect(t, "volumeBindingMode", sc.VolumeBindingMode, new(storagev1.VolumeBindingImmediate))

	pc := &schedulingv1.PriorityClass{}
	Apply(pc)
	expect(t, "preemptionPolicy", pc.PreemptionPolicy, new(corev1.PreemptLowerPriority))

	rb := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: "jane"}, {Kind: rbacv1.GroupKind, Name: "devs"}, {Kind: rbacv1.ServiceAccountKind, Name: "sa"}}}
	Apply(rb)
	expect(t, "roleRef apiGroup", rb.RoleRef.APIGroup, rbacv1.GroupName)
	expect(t, "user subject apiGroup", rb.Subjects[0].APIGroup, rbacv1.GroupName)
	expect(t, "group subject apiGroup", rb.Subjects[1].APIGroup, rbacv1.GroupName)
	expect(t, "service account subject apiGroup", rb.Subjects[2].APIGroup, "")

	es := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: new(int32(80))}}}
	Apply(es)
	expect(t, "slice port name", es.Ports[0].Name, new(""))
	expect(t, "slice port protocol", es.Ports[0].Protocol, new(corev1.ProtocolTCP))

	csr := &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{
		Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved}}}}
	Apply(csr)
	expect(t, "csr condition status", csr.Status.Conditions[0].Status, corev1.ConditionTrue)
}

func TestAliasedFieldsAgree(t *testing.T) {
	pod := &corev1.Pod{
		Spec:   corev1.PodSpec{DeprecatedServiceAccount: "builder"},
		Status: corev1.PodStatus{PodIP: "10.42.0.5", PodIPs: []corev1.PodIP{{IP: "10.42.0.9"}, {IP: "fd00::9"}}, HostIPs: []corev1.HostIP{{IP: "192.168.1.2"}}},
	}
	Apply(pod)
	expect(t, "serviceAccountName from deprecated alias", pod.Spec.ServiceAccountName, "builder")
	expect(t, "podIPs follow the authoritative podIP", pod.Status.PodIPs, []corev1.PodIP{{IP: "10.42.0.5"}})
	expect(t, "hostIP mirrors hostIPs", pod.Status.HostIP, "192.168.1.2")

	tmpl := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "web"}}}}
	Apply(tmpl)
	expect(t, "deprecated alias mirrors serviceAccountName", tmpl.Spec.Template.Spec.DeprecatedServiceAccount, "web")

	node := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.42.1.0/24"}}
	Apply(node)
	expect(t, "podCIDRs from podCIDR", node.Spec.PodCIDRs, []string{"10.42.1.0/24"})
}

func TestApplyGeneratesJobSelectorOnlyOnCreate(t *testing.T) {
	created := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", UID: "uid-3"}, Spec: batchv1.JobSpec{Template: template()}}
	Apply(created)
	expect(t, "selector of a job being created", created.Spec.Selector, &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "uid-3"}})

	updated := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", UID: "uid-3", ResourceVersion: "9"}, Spec: batchv1.JobSpec{Template: template()}}
	Apply(updated)
	expect(t, "selector of a stored job", updated.Spec.Selector, (*metav1.LabelSelector)(nil))
}
