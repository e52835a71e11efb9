package serviceendpoint

import (
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
)

func testSlice(family discoveryv1.AddressType, portName string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{AddressType: family, Ports: []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port)}}, Endpoints: eps}
}

func ep(addr string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func TestRandom_PicksOnlyUsableEndpoints(t *testing.T) {
	cases := []struct {
		name      string
		slices    []*discoveryv1.EndpointSlice
		port      string
		preferred discoveryv1.AddressType
		valid     func(*discoveryv1.Endpoint) bool
		want      string // "" means no endpoint
	}{
		{"ready and unknown readiness count, unready does not", []*discoveryv1.EndpointSlice{
			testSlice(discoveryv1.AddressTypeIPv4, "https", 9444, ep("10.0.0.1", ptr.To(false)), ep("10.0.0.2", nil)),
		}, "https", discoveryv1.AddressTypeIPv4, nil, "10.0.0.2:9444"},
		{"port name must match", []*discoveryv1.EndpointSlice{
			testSlice(discoveryv1.AddressTypeIPv4, "metrics", 8080, ep("10.0.0.1", ptr.To(true))),
		}, "https", discoveryv1.AddressTypeIPv4, nil, ""},
		{"preferred family first", []*discoveryv1.EndpointSlice{
			testSlice(discoveryv1.AddressTypeIPv4, "https", 9444, ep("10.0.0.1", ptr.To(true))),
			testSlice(discoveryv1.AddressTypeIPv6, "https", 9444, ep("fd00::1", ptr.To(true))),
		}, "https", discoveryv1.AddressTypeIPv6, nil, "[fd00::1]:9444"},
		{"valid filters", []*discoveryv1.EndpointSlice{
			testSlice(discoveryv1.AddressTypeIPv4, "https", 9444, ep("10.0.0.1", ptr.To(true)), ep("10.0.0.2", ptr.To(true))),
		}, "https", discoveryv1.AddressTypeIPv4, func(e *discoveryv1.Endpoint) bool { return e.Addresses[0] == "10.0.0.2" }, "10.0.0.2:9444"},
		{"endpoint without addresses is skipped", []*discoveryv1.EndpointSlice{
			testSlice(discoveryv1.AddressTypeIPv4, "https", 9444, discoveryv1.Endpoint{}),
		}, "https", discoveryv1.AddressTypeIPv4, func(e *discoveryv1.Endpoint) bool { return e.Addresses[0] != "" }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Random order: every run must give the one right answer.
			for range 20 {
				got, err := Random("svc", tc.slices, tc.port, tc.preferred, tc.valid)
				if tc.want == "" {
					if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), `no endpoints available for service "svc"`) {
						t.Fatalf("Random = %q, %v; want upstream's 503", got, err)
					}
					continue
				}
				if err != nil || got != tc.want {
					t.Fatalf("Random = %q, %v; want %q", got, err, tc.want)
				}
			}
		})
	}
}
