package printers

import (
	"fmt"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// horizontalPodAutoscalerPrinter prints autoscaling/v2 objects, the version
// the apiserver stores.
func horizontalPodAutoscalerPrinter() Printer {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Reference", "string", spec["scaleTargetRef"]),
			column("Targets", "string", spec["metrics"]),
			column("MinPods", "string", spec["minReplicas"]),
			column("MaxPods", "string", spec["maxReplicas"]),
			column("Replicas", "string", autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]),
			ageColumn(),
		},
		Cells: horizontalPodAutoscalerCells,
	}
}

func horizontalPodAutoscalerCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	hpa, err := typed[autoscalingv2.HorizontalPodAutoscaler](obj)
	if err != nil {
		return nil, err
	}
	minPods := "<unset>"
	if hpa.Spec.MinReplicas != nil {
		minPods = fmt.Sprintf("%d", *hpa.Spec.MinReplicas)
	}
	return []interface{}{
		hpa.Name,
		fmt.Sprintf("%s/%s", hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name),
		formatHPAMetrics(hpa.Spec.Metrics, hpa.Status.CurrentMetrics),
		minPods,
		int64(hpa.Spec.MaxReplicas),
		int64(hpa.Status.CurrentReplicas),
		translateTimestampSince(hpa.CreationTimestamp, now),
	}, nil
}

// formatHPAMetrics prints "current/target" for the first two metrics; the
// status list is matched to the spec list by position.
func formatHPAMetrics(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const max = 2
	list := make([]string, 0, len(specs))
	for i, spec := range specs {
		var status *autoscalingv2.MetricStatus
		if i < len(statuses) {
			status = &statuses[i]
		}
		list = append(list, formatHPAMetric(spec, status))
	}
	if len(list) > max {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:max], ", "), len(list)-max)
	}
	return strings.Join(list, ", ")
}

func formatHPAMetric(spec autoscalingv2.MetricSpec, status *autoscalingv2.MetricStatus) string {
	switch {
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		var current *autoscalingv2.MetricValueStatus
		if status != nil && status.External != nil {
			current = &status.External.Current
		}
		return formatValueMetric(spec.External.Target, current)
	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		current := "<unknown>"
		if status != nil && status.Pods != nil {
			current = status.Pods.Current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.Pods.Target.AverageValue.String())
	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		var current *autoscalingv2.MetricValueStatus
		if status != nil && status.Object != nil {
			current = &status.Object.Current
		}
		return formatValueMetric(spec.Object.Target, current)
	case spec.Type == autoscalingv2.ResourceMetricSourceType && spec.Resource != nil:
		var current *autoscalingv2.MetricValueStatus
		if status != nil && status.Resource != nil {
			current = &status.Resource.Current
		}
		return spec.Resource.Name.String() + ": " + formatResourceMetric(spec.Resource.Target, current)
	case spec.Type == autoscalingv2.ContainerResourceMetricSourceType && spec.ContainerResource != nil:
		var current *autoscalingv2.MetricValueStatus
		if status != nil && status.ContainerResource != nil {
			current = &status.ContainerResource.Current
		}
		return spec.ContainerResource.Name.String() + ": " + formatResourceMetric(spec.ContainerResource.Target, current)
	}
	return "<unknown type>"
}

// formatValueMetric is for object and external metrics: an average-value
// target is marked "(avg)".
func formatValueMetric(target autoscalingv2.MetricTarget, current *autoscalingv2.MetricValueStatus) string {
	now := "<unknown>"
	if target.AverageValue != nil {
		if current != nil && current.AverageValue != nil {
			now = current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s (avg)", now, target.AverageValue.String())
	}
	if current != nil {
		now = current.Value.String()
	}
	return fmt.Sprintf("%s/%s", now, target.Value.String())
}

// formatResourceMetric is for cpu/memory metrics, targeted either as an
// average value or as a utilization percentage.
func formatResourceMetric(target autoscalingv2.MetricTarget, current *autoscalingv2.MetricValueStatus) string {
	now := "<unknown>"
	if target.AverageValue != nil {
		if current != nil {
			now = current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", now, target.AverageValue.String())
	}
	if current != nil && current.AverageUtilization != nil {
		now = fmt.Sprintf("%d%%", *current.AverageUtilization)
	}
	goal := "<auto>"
	if target.AverageUtilization != nil {
		goal = fmt.Sprintf("%d%%", *target.AverageUtilization)
	}
	return fmt.Sprintf("%s/%s", now, goal)
}
