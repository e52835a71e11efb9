package validation

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func webSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

func validDeployment() *appsv1.Deployment {
	return defaulted(&appsv1.Deployment{ObjectMeta: objMeta("web"), Spec: appsv1.DeploymentSpec{
		Selector: webSelector(), Template: podTemplate(map[string]string{"app": "web"}),
	}})
}

func TestValidateDeployment(t *testing.T) {
	runCreateCases(t, validDeployment, []errCase[*appsv1.Deployment]{
		{"selector required", func(d *appsv1.Deployment) { d.Spec.Selector = nil }, field.ErrorTypeRequired, "spec.selector", ""},
		{"selector may not be empty", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			field.ErrorTypeInvalid, "spec.selector", "empty selector is invalid for deployment"},
		{"selector must match template labels", func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "api"} },
			field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"},
		{"replicas not negative", func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(-1)) }, field.ErrorTypeInvalid, "spec.replicas", ""},
		{"template restart policy Always", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			field.ErrorTypeNotSupported, "spec.template.spec.restartPolicy", ""},
		{"template pod spec validated", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			field.ErrorTypeRequired, "spec.template.spec.containers[0].image", ""},
		{"no active deadline on long-running pods", func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = new(int64(10)) },
			field.ErrorTypeForbidden, "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in ReplicaSet is not Supported"},
		{"surge and unavailable not both zero", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: new(intstr.FromInt32(0)), MaxSurge: new(intstr.FromString("0%"))}
		}, field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0"},
		{"max unavailable at most 100%", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = new(intstr.FromString("150%"))
		},
			field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxUnavailable", "must not be greater than 100%"},
		{"percent syntax", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = new(intstr.FromString("lots")) },
			field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxSurge", ""},
		{"Recreate takes no rolling parameters", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType },
			field.ErrorTypeForbidden, "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"},
		{"progress deadline beyond min ready", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 600 },
			field.ErrorTypeInvalid, "spec.progressDeadlineSeconds", "must be greater than minReadySeconds"},
	})
	runUpdateCases(t, func() *appsv1.Deployment { return stored(validDeployment()) }, []updateCase[*appsv1.Deployment]{
		{"replicas and image may change", func(d *appsv1.Deployment) {
			d.Spec.Replicas = new(int32(5))
			d.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
		}, "", "", ""},
		{"selector is immutable", func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
			d.Spec.Template.Labels["v"] = "2"
		}, field.ErrorTypeInvalid, "spec.selector", "field is immutable"},
	})
}

func TestValidateReplicaSetAndRC(t *testing.T) {
	validRS := func() *appsv1.ReplicaSet {
		return defaulted(&appsv1.ReplicaSet{ObjectMeta: objMeta("web-1"), Spec: appsv1.ReplicaSetSpec{
			Selector: webSelector(), Template: podTemplate(map[string]string{"app": "web"})}})
	}
	runCreateCases(t, validRS, []errCase[*appsv1.ReplicaSet]{
		{"selector must match template labels", func(r *appsv1.ReplicaSet) { r.Spec.Template.Labels = nil },
			field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"},
		{"selector syntax", func(r *appsv1.ReplicaSet) {
			r.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
		}, field.ErrorTypeInvalid, "spec.selector.matchExpressions[0].operator", ""},
	})
	validRC := func() *corev1.ReplicationController {
		tmpl := podTemplate(map[string]string{"app": "web"})
		return defaulted(&corev1.ReplicationController{ObjectMeta: objMeta("web"), Spec: corev1.ReplicationControllerSpec{Template: &tmpl}})
	}
	runCreateCases(t, validRC, []errCase[*corev1.ReplicationController]{
		{"template required", func(r *corev1.ReplicationController) { r.Spec.Template = nil }, field.ErrorTypeRequired, "spec.template", ""},
		{"selector required", func(r *corev1.ReplicationController) { r.Spec.Selector = nil }, field.ErrorTypeRequired, "spec.selector", ""},
		{"selector must match template labels", func(r *corev1.ReplicationController) { r.Spec.Selector = map[string]string{"app": "db"} },
			field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"},
	})
}

func TestValidateDaemonSet(t *testing.T) {
	valid := func() *appsv1.DaemonSet {
		return defaulted(&appsv1.DaemonSet{ObjectMeta: objMeta("agent"), Spec: appsv1.DaemonSetSpec{
			Selector: webSelector(), Template: podTemplate(map[string]string{"app": "web"})}})
	}
	runCreateCases(t, valid, []errCase[*appsv1.DaemonSet]{
		{"empty selector", func(d *appsv1.DaemonSet) { d.Spec.Selector = &metav1.LabelSelector{} },
			field.ErrorTypeInvalid, "spec.selector", "empty selector is invalid for daemonset"},
		{"missing selector matches no template", func(d *appsv1.DaemonSet) { d.Spec.Selector = nil },
			field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"},
		{"surge only without unavailability", func(d *appsv1.DaemonSet) { d.Spec.UpdateStrategy.RollingUpdate.MaxSurge = new(intstr.FromInt32(1)) },
			field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxSurge", "may not be set when maxUnavailable is non-zero"},
		{"strategy type enum", func(d *appsv1.DaemonSet) { d.Spec.UpdateStrategy.Type = "Rolling" }, field.ErrorTypeNotSupported, "spec.updateStrategy.type", ""},
	})
	runUpdateCases(t, func() *appsv1.DaemonSet { return stored(valid()) }, []updateCase[*appsv1.DaemonSet]{
		{"selector is immutable", func(d *appsv1.DaemonSet) {
			d.Spec.Selector.MatchLabels["tier"] = "x"
			d.Spec.Template.Labels["tier"] = "x"
		},
			field.ErrorTypeInvalid, "spec.selector", "field is immutable"},
	})
}

func validStatefulSet() *appsv1.StatefulSet {
	tmpl := podTemplate(map[string]string{"app": "web"})
	tmpl.Spec.Volumes = nil
	tmpl.Spec.Containers[0].VolumeMounts[0].Name = "www"
	return defaulted(&appsv1.StatefulSet{ObjectMeta: objMeta("web"), Spec: appsv1.StatefulSetSpec{
		Selector: webSelector(), Template: tmpl, ServiceName: "web",
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "www"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}},
	}})
}

func TestValidateStatefulSet(t *testing.T) {
	runCreateCases(t, validStatefulSet, []errCase[*appsv1.StatefulSet]{
		{"empty selector", func(s *appsv1.StatefulSet) { s.Spec.Selector = &metav1.LabelSelector{} },
			field.ErrorTypeInvalid, "spec.selector", "empty selector is invalid for statefulset"},
		{"pod management policy enum", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = "Random" },
			field.ErrorTypeInvalid, "spec.podManagementPolicy", "must be 'OrderedReady' or 'Parallel'"},
		{"OnDelete takes no rolling parameters", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType },
			field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate", "only allowed for updateStrategy 'RollingUpdate'"},
		{"mount must name a volume or claim", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].VolumeMounts[0].Name = "logs" },
			field.ErrorTypeNotFound, "spec.template.spec.containers[0].volumeMounts[0].name", ""},
		{"claim templates need storage", func(s *appsv1.StatefulSet) { s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests = nil },
			field.ErrorTypeRequired, "spec.volumeClaimTemplates[0].spec.resources[storage]", ""},
		{"retention policy enum", func(s *appsv1.StatefulSet) { s.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = "Keep" },
			field.ErrorTypeNotSupported, "spec.persistentVolumeClaimRetentionPolicy.whenDeleted", ""},
	})
	runUpdateCases(t, func() *appsv1.StatefulSet { return stored(validStatefulSet()) }, []updateCase[*appsv1.StatefulSet]{
		{"replicas, template and strategy may change", func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = new(int32(3))
			s.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
			s.Spec.UpdateStrategy.RollingUpdate.Partition = new(int32(1))
			s.Spec.MinReadySeconds = 5
		}, "", "", ""},
		{"service name is immutable", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" },
			field.ErrorTypeForbidden, "spec", "updates to statefulset spec for fields other than 'replicas'"},
		{"claim templates are immutable", func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, field.ErrorTypeForbidden, "spec", "are forbidden"},
	})
}
