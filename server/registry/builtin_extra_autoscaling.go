package registry

import (
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// autoscaling/v1 HorizontalPodAutoscalers are stored as autoscaling/v2, as
// upstream stores them. v1 knows only a CPU utilization target; what v2
// says beyond it travels in annotations, so an object read and written
// back through v1 keeps its other metrics, behavior, metric statuses and
// conditions (upstream's pkg/apis/autoscaling/v1 conversion).
const (
	hpaMetricsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	hpaStatusesAnnotation   = "autoscaling.alpha.kubernetes.io/current-metrics"
	hpaConditionsAnnotation = "autoscaling.alpha.kubernetes.io/conditions"
	hpaBehaviorAnnotation   = "autoscaling.alpha.kubernetes.io/behavior"
	// defaultCPUUtilization is what v1 implies when it names no target.
	defaultCPUUtilization = 80
)

var hpaRoundTripAnnotations = []string{hpaMetricsAnnotation, hpaStatusesAnnotation, hpaConditionsAnnotation, hpaBehaviorAnnotation}

func hpaV1Conversion() *Conversion {
	return &Conversion{
		StorageVersion: "v2",
		NewStored:      func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		ToStorage: func(obj runtime.Object) (runtime.Object, error) {
			in, ok := obj.(*autoscalingv1.HorizontalPodAutoscaler)
			if !ok {
				return nil, fmt.Errorf("convert to autoscaling/v2: unexpected %T", obj)
			}
			return HPAToV2(in), nil
		},
		FromStorage: func(obj runtime.Object) (runtime.Object, error) {
			in, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
			if !ok {
				return nil, fmt.Errorf("convert to autoscaling/v1: unexpected %T", obj)
			}
			return HPAToV1(in)
		},
	}
}

// dropRoundTrip copies annotations without the conversion's own.
func dropRoundTrip(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range hpaRoundTripAnnotations {
		delete(out, k)
	}
	if len(out) == 0 && len(in) > 0 {
		return nil
	}
	return out
}

func cpuUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
		m.Resource.Target.AverageUtilization != nil
}

// HPAToV1 converts a stored autoscaling/v2 HorizontalPodAutoscaler to v1.
func HPAToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	out := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = "autoscaling/v1", "HorizontalPodAutoscaler"
	out.Annotations = dropRoundTrip(out.Annotations)
	ref := in.Spec.ScaleTargetRef
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: ref.Kind, Name: ref.Name, APIVersion: ref.APIVersion},
		MinReplicas:    copyPtr(in.Spec.MinReplicas), MaxReplicas: in.Spec.MaxReplicas,
	}
	var others []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if cpuUtilization(m) {
			if out.Spec.TargetCPUUtilizationPercentage == nil {
				out.Spec.TargetCPUUtilizationPercentage = copyPtr(m.Resource.Target.AverageUtilization)
			}
			continue
		}
		others = append(others, metricSpecToV1(m))
	}
	st := in.Status
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{ObservedGeneration: copyPtr(st.ObservedGeneration), LastScaleTime: st.LastScaleTime.DeepCopy(),
		CurrentReplicas: st.CurrentReplicas, DesiredReplicas: st.DesiredReplicas}
	statuses := make([]autoscalingv1.MetricStatus, 0, len(st.CurrentMetrics))
	for _, m := range st.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = copyPtr(m.Resource.Current.AverageUtilization)
		}
		statuses = append(statuses, metricStatusToV1(m))
	}
	conditions := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(st.Conditions))
	for i, c := range st.Conditions {
		conditions[i] = autoscalingv1.HorizontalPodAutoscalerCondition{Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
	}
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[key] = string(b)
		return nil
	}
	var err error
	if len(others) > 0 {
		err = set(hpaMetricsAnnotation, others)
	}
	if err == nil && len(st.CurrentMetrics) > 0 {
		err = set(hpaStatusesAnnotation, statuses)
	}
	if err == nil && in.Spec.Behavior != nil {
		err = set(hpaBehaviorAnnotation, behaviorToAnnotation(in.Spec.Behavior))
	}
	if err == nil && len(st.Conditions) > 0 {
		err = set(hpaConditionsAnnotation, conditions)
	}
	return out, err
}

// HPAToV2 converts an autoscaling/v1 HorizontalPodAutoscaler to v2, taking
// back what the annotations carry. Unreadable annotations are ignored, as
// upstream ignores them.
func HPAToV2(in *autoscalingv1.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = "autoscaling/v2", "HorizontalPodAutoscaler"
	ann := in.Annotations
	out.Annotations = dropRoundTrip(out.Annotations)
	ref := in.Spec.ScaleTargetRef
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: ref.Kind, Name: ref.Name, APIVersion: ref.APIVersion},
		MinReplicas:    copyPtr(in.Spec.MinReplicas), MaxReplicas: in.Spec.MaxReplicas,
	}
	var others []autoscalingv1.MetricSpec
	if s, ok := ann[hpaMetricsAnnotation]; ok && json.Unmarshal([]byte(s), &others) == nil {
		for _, m := range others {
			out.Spec.Metrics = append(out.Spec.Metrics, metricSpecToV2(m))
		}
	}
	if p := in.Spec.TargetCPUUtilizationPercentage; p != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, cpuMetric(*p))
	}
	if len(out.Spec.Metrics) == 0 {
		// v1's implied target, made explicit as upstream does
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(defaultCPUUtilization)}
	}
	var b behaviorAnnotation
	if s, ok := ann[hpaBehaviorAnnotation]; ok && json.Unmarshal([]byte(s), &b) == nil && (b.ScaleUp != nil || b.ScaleDown != nil) {
		out.Spec.Behavior = b.toV2()
	}
	st := in.Status
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: copyPtr(st.ObservedGeneration), LastScaleTime: st.LastScaleTime.DeepCopy(),
		CurrentReplicas: st.CurrentReplicas, DesiredReplicas: st.DesiredReplicas}
	var statuses []autoscalingv1.MetricStatus
	if s, ok := ann[hpaStatusesAnnotation]; ok && json.Unmarshal([]byte(s), &statuses) == nil {
		for _, m := range statuses {
			out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, metricStatusToV2(m))
		}
	} else if p := st.CurrentCPUUtilizationPercentage; p != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyPtr(p)}}}}
	}
	var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
	if s, ok := ann[hpaConditionsAnnotation]; ok && json.Unmarshal([]byte(s), &conditions) == nil {
		for _, c := range conditions {
			out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type),
				Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
		}
	}
	return out
}

func cpuMetric(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent}}}
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func quantityOr(q *resource.Quantity) resource.Quantity {
	if q == nil {
		return resource.Quantity{}
	}
	return q.DeepCopy()
}

func refToV1(r autoscalingv2.CrossVersionObjectReference) autoscalingv1.CrossVersionObjectReference {
	return autoscalingv1.CrossVersionObjectReference{Kind: r.Kind, Name: r.Name, APIVersion: r.APIVersion}
}

func refToV2(r autoscalingv1.CrossVersionObjectReference) autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{Kind: r.Kind, Name: r.Name, APIVersion: r.APIVersion}
}

func metricSpecToV1(m autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricSource{Target: refToV1(m.Object.DescribedObject), MetricName: m.Object.Metric.Name,
			TargetValue: quantityOr(m.Object.Target.Value), Selector: m.Object.Metric.Selector, AverageValue: m.Object.Target.AverageValue}
	case m.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricSource{MetricName: m.Pods.Metric.Name, TargetAverageValue: quantityOr(m.Pods.Target.AverageValue), Selector: m.Pods.Metric.Selector}
	case m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: m.Resource.Name, TargetAverageUtilization: m.Resource.Target.AverageUtilization,
			TargetAverageValue: m.Resource.Target.AverageValue}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			TargetAverageUtilization: m.ContainerResource.Target.AverageUtilization, TargetAverageValue: m.ContainerResource.Target.AverageValue}
	case m.External != nil:
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: m.External.Metric.Name, MetricSelector: m.External.Metric.Selector,
			TargetValue: m.External.Target.Value, TargetAverageValue: m.External.Target.AverageValue}
	}
	return out
}

// targetType is Utilization when there is a utilization, else AverageValue,
// the way upstream reads v1's resource targets.
func targetType(utilization *int32) autoscalingv2.MetricTargetType {
	if utilization != nil {
		return autoscalingv2.UtilizationMetricType
	}
	return autoscalingv2.AverageValueMetricType
}

func metricSpecToV2(m autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, AverageValue: m.Object.AverageValue}
		if m.Object.AverageValue == nil || !m.Object.TargetValue.IsZero() {
			v := m.Object.TargetValue.DeepCopy()
			t.Value = &v
		}
		if m.Object.AverageValue != nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		out.Object = &autoscalingv2.ObjectMetricSource{DescribedObject: refToV2(m.Object.Target), Target: t,
			Metric: autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector}}
	case m.Pods != nil:
		v := m.Pods.TargetAverageValue.DeepCopy()
		out.Pods = &autoscalingv2.PodsMetricSource{Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &v},
			Metric: autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector}}
	case m.Resource != nil:
		r := m.Resource
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: r.Name, Target: autoscalingv2.MetricTarget{Type: targetType(r.TargetAverageUtilization),
			AverageUtilization: r.TargetAverageUtilization, AverageValue: r.TargetAverageValue}}
	case m.ContainerResource != nil:
		r := m.ContainerResource
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: r.Name, Container: r.Container, Target: autoscalingv2.MetricTarget{
			Type: targetType(r.TargetAverageUtilization), AverageUtilization: r.TargetAverageUtilization, AverageValue: r.TargetAverageValue}}
	case m.External != nil:
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: m.External.TargetValue, AverageValue: m.External.TargetAverageValue}
		if m.External.TargetValue == nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{Target: t, Metric: autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector}}
	}
	return out
}

func metricStatusToV1(m autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricStatus{Target: refToV1(m.Object.DescribedObject), MetricName: m.Object.Metric.Name,
			CurrentValue: quantityOr(m.Object.Current.Value), Selector: m.Object.Metric.Selector, AverageValue: m.Object.Current.AverageValue}
	case m.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: m.Pods.Metric.Name, CurrentAverageValue: quantityOr(m.Pods.Current.AverageValue), Selector: m.Pods.Metric.Selector}
	case m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: m.Resource.Name, CurrentAverageUtilization: m.Resource.Current.AverageUtilization,
			CurrentAverageValue: quantityOr(m.Resource.Current.AverageValue)}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			CurrentAverageUtilization: m.ContainerResource.Current.AverageUtilization, CurrentAverageValue: quantityOr(m.ContainerResource.Current.AverageValue)}
	case m.External != nil:
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: m.External.Metric.Name, MetricSelector: m.External.Metric.Selector,
			CurrentValue: quantityOr(m.External.Current.Value), CurrentAverageValue: m.External.Current.AverageValue}
	}
	return out
}

func metricStatusToV2(m autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	q := func(v resource.Quantity) *resource.Quantity { c := v.DeepCopy(); return &c }
	switch {
	case m.Object != nil:
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: refToV2(m.Object.Target), Current: autoscalingv2.MetricValueStatus{Value: q(m.Object.CurrentValue),
			AverageValue: m.Object.AverageValue}, Metric: autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector}}
	case m.Pods != nil:
		out.Pods = &autoscalingv2.PodsMetricStatus{Current: autoscalingv2.MetricValueStatus{AverageValue: q(m.Pods.CurrentAverageValue)},
			Metric: autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector}}
	case m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: m.Resource.Name, Current: autoscalingv2.MetricValueStatus{
			AverageUtilization: m.Resource.CurrentAverageUtilization, AverageValue: q(m.Resource.CurrentAverageValue)}}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: m.ContainerResource.CurrentAverageUtilization, AverageValue: q(m.ContainerResource.CurrentAverageValue)}}
	case m.External != nil:
		out.External = &autoscalingv2.ExternalMetricStatus{Current: autoscalingv2.MetricValueStatus{Value: q(m.External.CurrentValue), AverageValue: m.External.CurrentAverageValue},
			Metric: autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector}}
	}
	return out
}

// behaviorAnnotation is the encoding upstream puts in the behavior
// annotation: its internal type, which has no JSON tags, so the keys are the
// Go field names.
type behaviorAnnotation struct {
	ScaleUp, ScaleDown *scalingRulesAnnotation
}

type scalingRulesAnnotation struct {
	StabilizationWindowSeconds *int32
	SelectPolicy               *autoscalingv2.ScalingPolicySelect
	Policies                   []struct {
		Type          autoscalingv2.HPAScalingPolicyType
		Value         int32
		PeriodSeconds int32
	}
	Tolerance *resource.Quantity
}

func behaviorToAnnotation(b *autoscalingv2.HorizontalPodAutoscalerBehavior) behaviorAnnotation {
	rules := func(r *autoscalingv2.HPAScalingRules) *scalingRulesAnnotation {
		if r == nil {
			return nil
		}
		out := &scalingRulesAnnotation{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy, Tolerance: r.Tolerance}
		for _, p := range r.Policies {
			out.Policies = append(out.Policies, struct {
				Type          autoscalingv2.HPAScalingPolicyType
				Value         int32
				PeriodSeconds int32
			}{p.Type, p.Value, p.PeriodSeconds})
		}
		return out
	}
	return behaviorAnnotation{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
}

func (b behaviorAnnotation) toV2() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	rules := func(r *scalingRulesAnnotation) *autoscalingv2.HPAScalingRules {
		if r == nil {
			return nil
		}
		out := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy, Tolerance: r.Tolerance}
		for _, p := range r.Policies {
			out.Policies = append(out.Policies, autoscalingv2.HPAScalingPolicy{Type: p.Type, Value: p.Value, PeriodSeconds: p.PeriodSeconds})
		}
		return out
	}
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
}
