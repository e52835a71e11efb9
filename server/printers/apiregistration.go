package printers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// apiServicePrinter is upstream's APIService table: NAME SERVICE
// AVAILABLE AGE, the service "Local" for a group-version served by the
// API server itself and the availability with its reason when not True.
func apiServicePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Service", "string", "The reference to the service that hosts this API endpoint."),
			column("Available", "string", "Whether this service is available."),
			ageColumn(),
		},
		Cells: func(obj runtime.Object, now time.Time) ([]interface{}, error) {
			s, err := typed[apiregistrationv1.APIService](obj)
			if err != nil {
				return nil, err
			}
			service := "Local"
			if s.Spec.Service != nil {
				service = s.Spec.Service.Namespace + "/" + s.Spec.Service.Name
			}
			return []interface{}{s.Name, service, apiServiceAvailable(s), translateTimestampSince(s.CreationTimestamp, now)}, nil
		},
	}
}

func apiServiceAvailable(s *apiregistrationv1.APIService) string {
	for _, c := range s.Status.Conditions {
		if c.Type != apiregistrationv1.Available {
			continue
		}
		if c.Status != apiregistrationv1.ConditionTrue && c.Reason != "" {
			return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
		}
		return string(c.Status)
	}
	return string(apiregistrationv1.ConditionUnknown)
}
