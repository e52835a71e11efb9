package aggregator

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/server/auth"
)

// Availability checks, as upstream's status controllers: local
// APIServices are always available; a remote one needs its Service, the
// Service port it names, a ready endpoint serving that port, and a
// discovery request answered in the 2xx range.

// aggregatorUser is who the checks and discovery fetches come from: with
// system:masters the extension API server's delegated authorization
// always lets them through.
var aggregatorUser = &auth.User{Name: "system:kube-aggregator", Groups: []string{"system:masters"}}

const (
	// discoveryCheckAttempts are made at once; one success is enough
	// (upstream's five).
	discoveryCheckAttempts = 5
	discoveryCheckTimeout  = 5 * time.Second
)

func available(s *apiregistrationv1.APIService) bool {
	c := condition(s, apiregistrationv1.Available)
	return c != nil && c.Status == apiregistrationv1.ConditionTrue
}

func condition(s *apiregistrationv1.APIService, t apiregistrationv1.APIServiceConditionType) *apiregistrationv1.APIServiceCondition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == t {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

// setCondition is upstream's SetAPIServiceCondition: the transition time
// moves only when the status does.
func setCondition(s *apiregistrationv1.APIService, c apiregistrationv1.APIServiceCondition) {
	cur := condition(s, c.Type)
	if cur == nil {
		s.Status.Conditions = append(s.Status.Conditions, c)
		return
	}
	if cur.Status != c.Status {
		cur.Status, cur.LastTransitionTime = c.Status, c.LastTransitionTime
	}
	cur.Reason, cur.Message = c.Reason, c.Message
}

func newCondition(status apiregistrationv1.ConditionStatus, reason, message string) apiregistrationv1.APIServiceCondition {
	return apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: status,
		LastTransitionTime: metav1.Now(), Reason: reason, Message: message}
}

// localCondition is upstream's NewLocalAvailableAPIServiceCondition.
func localCondition() apiregistrationv1.APIServiceCondition {
	return newCondition(apiregistrationv1.ConditionTrue, "Local", "Local APIServices are always available")
}

// checker decides the Available condition of remote APIServices.
type checker struct {
	services   serviceGetter
	slices     sliceLister
	resolver   resolver
	transports *transports
}

// serviceGetter and sliceLister are the reads a check makes.
type serviceGetter interface {
	get(namespace, name string) (*corev1.Service, error)
}

type sliceLister interface {
	forService(namespace, name string) ([]*discoveryv1.EndpointSlice, error)
}

// check returns the Available condition of a remote APIService, with
// upstream's reasons and messages.
func (c *checker) check(ctx context.Context, s *apiregistrationv1.APIService) apiregistrationv1.APIServiceCondition {
	ref := s.Spec.Service
	port := servicePort(s)
	svc, err := c.services.get(ref.Namespace, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		return newCondition(apiregistrationv1.ConditionFalse, "ServiceNotFound", fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace))
	case err != nil:
		return newCondition(apiregistrationv1.ConditionUnknown, "ServiceAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err))
	}
	if svc.Spec.Type == corev1.ServiceTypeClusterIP || svc.Spec.Type == "" {
		if cond, ok := c.checkEndpoints(svc, ref, port); !ok {
			return cond
		}
	}
	if err := c.checkDiscovery(ctx, s); err != nil {
		return newCondition(apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", err.Error())
	}
	return newCondition(apiregistrationv1.ConditionTrue, "Passed", "all checks passed")
}

// checkEndpoints checks that a ClusterIP Service listens on the port and
// has a ready endpoint serving it; ok false comes with the condition.
func (c *checker) checkEndpoints(svc *corev1.Service, ref *apiregistrationv1.ServiceReference, port int32) (apiregistrationv1.APIServiceCondition, bool) {
	idx := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
	if idx < 0 {
		return newCondition(apiregistrationv1.ConditionFalse, "ServicePortError", fmt.Sprintf("service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, port)), false
	}
	portName := svc.Spec.Ports[idx].Name
	list, err := c.slices.forService(ref.Namespace, ref.Name)
	switch {
	case err != nil:
		return newCondition(apiregistrationv1.ConditionUnknown, "EndpointsAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)), false
	case len(list) == 0:
		return newCondition(apiregistrationv1.ConditionFalse, "EndpointsNotFound", fmt.Sprintf("cannot find endpointslices for service/%s in %q", ref.Name, ref.Namespace)), false
	case !hasAvailableEndpoint(portName, list):
		return newCondition(apiregistrationv1.ConditionFalse, "MissingEndpoints", fmt.Sprintf("endpointslices for service/%s in %q have no addresses with port name %q", ref.Name, ref.Namespace, portName)), false
	}
	return apiregistrationv1.APIServiceCondition{}, true
}

// hasAvailableEndpoint is upstream's: a slice with a ready (or
// not-known-unready) endpoint and a port of that name.
func hasAvailableEndpoint(portName string, list []*discoveryv1.EndpointSlice) bool {
	return slices.ContainsFunc(list, func(s *discoveryv1.EndpointSlice) bool {
		ready := slices.ContainsFunc(s.Endpoints, func(e discoveryv1.Endpoint) bool {
			return e.Conditions.Ready == nil || *e.Conditions.Ready
		})
		return ready && slices.ContainsFunc(s.Ports, func(p discoveryv1.EndpointPort) bool {
			return p.Name != nil && *p.Name == portName && p.Port != nil
		})
	})
}

// checkDiscovery GETs /apis/<group>/<version> (/api/v1 for the legacy
// group) from the extension API server, several attempts at once, each at
// an endpoint of its own; one success passes.
func (c *checker) checkDiscovery(ctx context.Context, s *apiregistrationv1.APIService) error {
	rt, err := c.transports.forAPIService(s)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: rt, Timeout: discoveryCheckTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	path := "/apis/" + s.Spec.Group + "/" + s.Spec.Version
	if s.Name == "v1." {
		path = "/api/" + s.Spec.Version
	}
	results := make(chan error, discoveryCheckAttempts)
	for range discoveryCheckAttempts {
		go func() { results <- c.discoveryAttempt(ctx, client, s, path) }()
	}
	var last error
	passed := false
	for range discoveryCheckAttempts { // every attempt is awaited
		if err := <-results; err == nil {
			passed = true
		} else {
			last = err
		}
	}
	if passed {
		return nil
	}
	return last
}

func (c *checker) discoveryAttempt(ctx context.Context, client *http.Client, s *apiregistrationv1.APIService, path string) error {
	host, err := c.resolver.resolve(s.Spec.Service.Namespace, s.Spec.Service.Name, servicePort(s))
	if err != nil {
		return err
	}
	u := &url.URL{Scheme: "https", Host: host, Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	setIdentity(req, aggregatorUser)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("failing or missing response from %v: %w", u, err)
	}
	resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		return fmt.Errorf("failing or missing response from %v: bad status from %v: %d", u, u, resp.StatusCode)
	}
	return nil
}

// listerReads adapts client-go listers to the checker's reads.
type listerReads struct{ r resolver }

func (l listerReads) get(namespace, name string) (*corev1.Service, error) {
	return l.r.services.Services(namespace).Get(name)
}

func (l listerReads) forService(namespace, name string) ([]*discoveryv1.EndpointSlice, error) {
	return l.r.slices.EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
}
