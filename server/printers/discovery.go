package printers

import (
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func endpointSlicePrinter() Printer {
	doc := discoveryv1beta1.EndpointSlice{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("AddressType", "string", doc["addressType"]),
			column("Ports", "string", doc["ports"]),
			column("Endpoints", "string", doc["endpoints"]),
			ageColumn(),
		},
		Cells: endpointSliceCells,
	}
}

func endpointSliceCells(obj runtime.Object, now time.Time) ([]interface{}, error) {
	es, err := typed[discoveryv1.EndpointSlice](obj)
	if err != nil {
		return nil, err
	}
	ports := make([]string, 0, len(es.Ports))
	for _, p := range es.Ports {
		switch {
		case p.Port != nil:
			ports = append(ports, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			ports = append(ports, *p.Name)
		default:
			ports = append(ports, "*")
		}
	}
	var addrs []string
	for _, ep := range es.Endpoints {
		addrs = append(addrs, ep.Addresses...)
	}
	return []interface{}{
		es.Name,
		string(es.AddressType),
		listWithMore(ports, 3, "<unset>"),
		listWithMore(addrs, 3, "<unset>"),
		translateTimestampSince(es.CreationTimestamp, now),
	}, nil
}
