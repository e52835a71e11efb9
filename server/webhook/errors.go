package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What failed in a call, for callers to map to the Status they return
// (errors.Is(err, ErrTimeout), ...). Every error of Do is an *Error whose
// Kind is one of these.
var (
	// ErrInvalidConfig: the configuration cannot be called (neither URL
	// nor Service, an unparsable URL, a caBundle without certificates).
	ErrInvalidConfig = errors.New("invalid webhook configuration")
	// ErrUnreachable: no connection or no TLS session with the webhook
	// (no endpoints, refused, certificate not trusted, connection lost).
	ErrUnreachable = errors.New("webhook unreachable")
	// ErrTimeout: the webhook did not answer within the timeout.
	ErrTimeout = errors.New("webhook timed out")
	// ErrStatus: the webhook answered with a status code other than 2xx.
	ErrStatus = errors.New("webhook answered with an error status")
	// ErrUndecodable: the webhook's answer is not the JSON expected.
	ErrUndecodable = errors.New("webhook response cannot be decoded")
)

// ErrResponseTooLarge is the cause of an ErrUndecodable error when the
// answer exceeds Config.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("webhook response too large")

// Error is a failed webhook call.
type Error struct {
	// Kind is one of the sentinels above.
	Kind error
	// URL is the request's URL (the Service's DNS name for a Service,
	// whichever endpoint served it); empty for ErrInvalidConfig.
	URL string
	// StatusCode is the HTTP status of an ErrStatus answer.
	StatusCode int
	// Status is the metav1.Status an ErrStatus answer carried, if any.
	Status *metav1.Status
	// Err is the cause.
	Err error
}

// Error reads as Go's url.Error does (`Post "https://...": cause`), which
// is what upstream's messages show and what clients match ("deadline").
func (e *Error) Error() string {
	switch {
	case e.URL == "":
		return fmt.Sprintf("%v: %v", e.Kind, e.Err)
	case errors.Is(e.Kind, ErrStatus):
		return fmt.Sprintf("Post %q: the webhook answered %d %s: %v", e.URL, e.StatusCode, http.StatusText(e.StatusCode), e.Err)
	case errors.Is(e.Kind, ErrUndecodable):
		return fmt.Sprintf("Post %q: cannot decode the webhook's response: %v", e.URL, e.Err)
	default:
		return fmt.Sprintf("Post %q: %v", e.URL, e.Err)
	}
}

// Unwrap lets errors.Is match both the kind and the cause (for example
// context.DeadlineExceeded, or an API error from the Resolver).
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// connectionError classifies a failure of the round trip or of reading
// the body: a deadline (the context's or the network's) is a timeout,
// anything else means the webhook could not be reached.
func connectionError(url string, err error) *Error {
	kind := ErrUnreachable
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		kind = ErrTimeout
	}
	return &Error{Kind: kind, URL: url, Err: err}
}
