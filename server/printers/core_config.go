package printers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

func configMapPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]),
			ageColumn(),
		},
		Cells: configMapCells,
	}
}

func configMapCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	cm, err := typed[corev1.ConfigMap](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), translateTimestampSince(cm.CreationTimestamp, now)}, nil
}

func secretPrinter() Printer {
	doc := corev1.Secret{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Type", "string", doc["type"]),
			column("Data", "string", doc["data"]),
			ageColumn(),
		},
		Cells: secretCells,
	}
}

func secretCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	s, err := typed[corev1.Secret](obj)
	if err != nil {
		return nil, err
	}
	// stringData is merged into data when a Secret is decoded upstream, so a
	// key present in both counts once.
	keys := len(s.Data)
	for k := range s.StringData {
		if _, dup := s.Data[k]; !dup {
			keys++
		}
	}
	return []interface{}{s.Name, string(s.Type), int64(keys), translateTimestampSince(s.CreationTimestamp, now)}, nil
}

func serviceAccountPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]),
			ageColumn(),
		},
		Cells: serviceAccountCells,
	}
}

func serviceAccountCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	sa, err := typed[corev1.ServiceAccount](obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{sa.Name, int64(len(sa.Secrets)), translateTimestampSince(sa.CreationTimestamp, now)}, nil
}

func resourceQuotaPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
			column("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
			ageColumn(),
		},
		Cells: resourceQuotaCells,
	}
}

// resourceQuotaCells prints "resource: used/hard" per hard limit, sorted by
// name; limits.* resources go to the LIMIT column, all others to REQUEST.
func resourceQuotaCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	q, err := typed[corev1.ResourceQuota](obj)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(q.Status.Hard))
	for r := range q.Status.Hard {
		names = append(names, string(r))
	}
	sort.Strings(names)
	var requests, limits []string
	for _, name := range names {
		used := q.Status.Used[corev1.ResourceName(name)]
		hard := q.Status.Hard[corev1.ResourceName(name)]
		entry := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if pieces := strings.Split(name, "."); len(pieces) > 1 && pieces[0] == "limits" {
			limits = append(limits, entry)
		} else {
			requests = append(requests, entry)
		}
	}
	return []interface{}{q.Name, strings.Join(requests, ", "), strings.Join(limits, ", "), translateTimestampSince(q.CreationTimestamp, now)}, nil
}

func podTemplatePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Containers", "string", containersDescription),
			column("Images", "string", imagesDescription),
			column("Pod Labels", "string", "The labels for the pod template."),
		},
		Cells: podTemplateCells,
	}
}

func podTemplateCells(obj runtime.Object, _ time.Time) ([]interface{}, error) {
	pt, err := typed[corev1.PodTemplate](obj)
	if err != nil {
		return nil, err
	}
	names, images := layoutContainerCells(pt.Template.Spec.Containers)
	return []interface{}{pt.Name, names, images, labels.FormatLabels(pt.Template.Labels)}, nil
}

func replicationControllerPrinter() Printer {
	spec := corev1.ReplicationControllerSpec{}.SwaggerDoc()
	status := corev1.ReplicationControllerStatus{}.SwaggerDoc()
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
		Cells: replicationControllerCells,
	}
}

func replicationControllerCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	rc, err := typed[corev1.ReplicationController](obj)
	if err != nil {
		return nil, err
	}
	var containers []corev1.Container
	if rc.Spec.Template != nil {
		containers = rc.Spec.Template.Spec.Containers
	}
	names, images := layoutContainerCells(containers)
	return []interface{}{
		rc.Name,
		int64(derefInt32(rc.Spec.Replicas)),
		int64(rc.Status.Replicas),
		int64(rc.Status.ReadyReplicas),
		translateTimestampSince(rc.CreationTimestamp, now),
		names,
		images,
		labels.FormatLabels(rc.Spec.Selector),
	}, nil
}
