package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateContainerProbes checks what a long-running container may carry:
// lifecycle hooks and the three probes.
func validateContainerProbes(c *corev1.Container, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Lifecycle != nil {
		errs = append(errs, validateLifecycle(c.Lifecycle, gracePeriod, fldPath.Child("lifecycle"))...)
	}
	if p := c.LivenessProbe; p != nil {
		lp := fldPath.Child("livenessProbe")
		errs = append(errs, validateProbe(p, lp)...)
		// A liveness verdict after one success would restart healthy containers.
		if p.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(lp.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
		}
	}
	if p := c.ReadinessProbe; p != nil {
		rp := fldPath.Child("readinessProbe")
		errs = append(errs, validateProbe(p, rp)...)
		if p.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(rp.Child("terminationGracePeriodSeconds"), *p.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	if p := c.StartupProbe; p != nil {
		sp := fldPath.Child("startupProbe")
		errs = append(errs, validateProbe(p, sp)...)
		if p.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(sp.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
		}
	}
	return errs
}

func validateProbe(p *corev1.Probe, fldPath *field.Path) field.ErrorList {
	h := handlers{exec: p.Exec, httpGet: p.HTTPGet, tcpSocket: p.TCPSocket, grpc: p.GRPC}
	errs := validateHandlers(h, nil, fldPath)
	errs = append(errs, nonNegative(int64(p.InitialDelaySeconds), fldPath.Child("initialDelaySeconds"))...)
	errs = append(errs, nonNegative(int64(p.TimeoutSeconds), fldPath.Child("timeoutSeconds"))...)
	errs = append(errs, nonNegative(int64(p.PeriodSeconds), fldPath.Child("periodSeconds"))...)
	errs = append(errs, nonNegative(int64(p.SuccessThreshold), fldPath.Child("successThreshold"))...)
	errs = append(errs, nonNegative(int64(p.FailureThreshold), fldPath.Child("failureThreshold"))...)
	if g := p.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return errs
}

func validateLifecycle(l *corev1.Lifecycle, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	hooks := []struct {
		name string
		h    *corev1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}}
	for _, hook := range hooks {
		if h := hook.h; h != nil {
			hs := handlers{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}
			errs = append(errs, validateHandlers(hs, gracePeriod, fldPath.Child(hook.name))...)
		}
	}
	return errs
}

// handlers gathers the actions of a probe or lifecycle hook, of which exactly
// one must be set.
type handlers struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

func validateHandlers(h handlers, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	count := 0
	check := func(set bool, name string, validate func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if count > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 handler type"))
			return
		}
		count++
		errs = append(errs, validate(fldPath.Child(name))...)
	}
	check(h.exec != nil, "exec", func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	check(h.httpGet != nil, "httpGet", func(p *field.Path) field.ErrorList { return validateHTTPGet(h.httpGet, p) })
	check(h.tcpSocket != nil, "tcpSocket", func(p *field.Path) field.ErrorList {
		return portNumOrName(h.tcpSocket.Port, p.Child("port"))
	})
	check(h.grpc != nil, "grpc", func(p *field.Path) field.ErrorList { return portNum(h.grpc.Port, p.Child("port")) })
	check(h.sleep != nil, "sleep", func(p *field.Path) field.ErrorList { return validateSleep(h.sleep, gracePeriod, p) })
	if count == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a handler type"))
	}
	return errs
}

func validateHTTPGet(h *corev1.HTTPGetAction, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	errs = append(errs, portNumOrName(h.Port, fldPath.Child("port"))...)
	if h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
		errs = append(errs, notSupported(fldPath.Child("scheme"), h.Scheme, corev1.URISchemeHTTP, corev1.URISchemeHTTPS)...)
	}
	for _, hdr := range h.HTTPHeaders {
		errs = append(errs, messages(fldPath.Child("httpHeaders"), hdr.Name, utilvalidation.IsHTTPHeaderName(hdr.Name))...)
	}
	return errs
}

// validateSleep keeps a sleep hook inside the grace period, which would cut
// it short anyway.
func validateSleep(s *corev1.SleepAction, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	if gracePeriod == nil {
		return nil
	}
	if s.Seconds < 0 || s.Seconds > *gracePeriod {
		msg := fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *gracePeriod)
		return field.ErrorList{field.Invalid(fldPath, s.Seconds, msg)}
	}
	return nil
}
