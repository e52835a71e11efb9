package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Column descriptions below come from the beta types' docs because that is
// where upstream takes them from.

func deploymentPrinter() Printer {
	status := extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", "Number of the pod with ready state"),
			column("Up-to-date", "string", status["updatedReplicas"]),
			column("Available", "string", status["availableReplicas"]),
			ageColumn(),
			wideColumn("Containers", "string", containersDescription),
			wideColumn("Images", "string", imagesDescription),
			wideColumn("Selector", "string", extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()["selector"]),
		},
		Cells: deploymentCells,
	}
}

func deploymentCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	d, err := typed[appsv1.Deployment](obj)
	if err != nil {
		return nil, err
	}
	// Unlike the other workloads, an unparsable or empty selector is not
	// printed as <none>.
	selector := "<invalid>"
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = sel.String()
	}
	names, images := layoutContainerCells(d.Spec.Template.Spec.Containers)
	return []interface{}{
		d.Name,
		fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, derefInt32(d.Spec.Replicas)),
		int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas),
		translateTimestampSince(d.CreationTimestamp, now),
		names,
		images,
		selector,
	}, nil
}

func replicaSetPrinter() Printer {
	spec := extensionsv1beta1.ReplicaSetSpec{}.SwaggerDoc()
	status := extensionsv1beta1.ReplicaSetStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Desired", "integer", spec["replicas"]),
			column("Current", "integer", status["replicas"]),
			column("Ready", "integer", status["readyReplicas"]),
			ageColumn(),
			wideColumn("Containers", "string", containersDescription),
			wideColumn("Images", "string", imagesDescription),
			wideColumn("Selector", "string", spec["selector"]),
		},
		Cells: replicaSetCells,
	}
}

func replicaSetCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	rs, err := typed[appsv1.ReplicaSet](obj)
	if err != nil {
		return nil, err
	}
	names, images := layoutContainerCells(rs.Spec.Template.Spec.Containers)
	return []interface{}{
		rs.Name,
		int64(derefInt32(rs.Spec.Replicas)),
		int64(rs.Status.Replicas),
		int64(rs.Status.ReadyReplicas),
		translateTimestampSince(rs.CreationTimestamp, now),
		names,
		images,
		metav1.FormatLabelSelector(rs.Spec.Selector),
	}, nil
}

func statefulSetPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", "Number of the pod with ready state"),
			ageColumn(),
			wideColumn("Containers", "string", containersDescription),
			wideColumn("Images", "string", imagesDescription),
		},
		Cells: statefulSetCells,
	}
}

func statefulSetCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ss, err := typed[appsv1.StatefulSet](obj)
	if err != nil {
		return nil, err
	}
	names, images := layoutContainerCells(ss.Spec.Template.Spec.Containers)
	return []interface{}{
		ss.Name,
		fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, derefInt32(ss.Spec.Replicas)),
		translateTimestampSince(ss.CreationTimestamp, now),
		names,
		images,
	}, nil
}

func daemonSetPrinter() Printer {
	status := extensionsv1beta1.DaemonSetStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Desired", "integer", status["desiredNumberScheduled"]),
			column("Current", "integer", status["currentNumberScheduled"]),
			column("Ready", "integer", status["numberReady"]),
			column("Up-to-date", "integer", status["updatedNumberScheduled"]),
			column("Available", "integer", status["numberAvailable"]),
			column("Node Selector", "string", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
			ageColumn(),
			wideColumn("Containers", "string", containersDescription),
			wideColumn("Images", "string", imagesDescription),
			wideColumn("Selector", "string", extensionsv1beta1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
		},
		Cells: daemonSetCells,
	}
}

func daemonSetCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	ds, err := typed[appsv1.DaemonSet](obj)
	if err != nil {
		return nil, err
	}
	st := ds.Status
	names, images := layoutContainerCells(ds.Spec.Template.Spec.Containers)
	return []interface{}{
		ds.Name,
		int64(st.DesiredNumberScheduled),
		int64(st.CurrentNumberScheduled),
		int64(st.NumberReady),
		int64(st.UpdatedNumberScheduled),
		int64(st.NumberAvailable),
		labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
		translateTimestampSince(ds.CreationTimestamp, now),
		names,
		images,
		metav1.FormatLabelSelector(ds.Spec.Selector),
	}, nil
}

func controllerRevisionPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Controller", "string", "Controller of the object"),
			column("Revision", "string", appsv1beta1.ControllerRevision{}.SwaggerDoc()["revision"]),
			ageColumn(),
		},
		Cells: controllerRevisionCells,
	}
}

// controllerRevisionCells names the owning controller as kind.group/name,
// lower-cased (e.g. "daemonset.apps/kube-proxy").
func controllerRevisionCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	cr, err := typed[appsv1.ControllerRevision](obj)
	if err != nil {
		return nil, err
	}
	controller := "<none>"
	if ref := metav1.GetControllerOf(cr); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("controller reference of %s: %w", cr.Name, err)
		}
		controller = ref.Name
		if gk := gv.WithKind(ref.Kind).GroupKind(); !gk.Empty() {
			controller = strings.ToLower(gk.String()) + "/" + ref.Name
		}
	}
	return []interface{}{cr.Name, controller, cr.Revision, translateTimestampSince(cr.CreationTimestamp, now)}, nil
}
