package apiserver

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// kubeletQuery turns the options of a pods/<sub> request (PodLogOptions,
// PodExecOptions, PodAttachOptions, PodPortForwardOptions as query
// parameters) into the agent's path prefix and query, as kube-apiserver
// does for the kubelet. Bad options are 400; invalid ones 422.
func kubeletQuery(sub string, q url.Values, pod string) (string, url.Values, error) {
	switch sub {
	case "log":
		v, err := logQuery(q, pod)
		return "containerLogs", v, err
	case "exec", "attach":
		v := url.Values{}
		for _, p := range []string{"stdin", "stdout", "stderr", "tty"} {
			on, err := boolQuery(q, p)
			if err != nil {
				return "", nil, err
			}
			if on {
				v.Set(p, "1")
			}
		}
		if sub == "exec" {
			if len(q["command"]) == 0 {
				return "", nil, apierrors.NewBadRequest("you must specify at least one command for the container")
			}
			v["command"] = q["command"]
		}
		if v.Get("stdin") == "" && v.Get("stdout") == "" && v.Get("stderr") == "" {
			return "", nil, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
		}
		return sub, v, nil
	case "portforward":
		v := url.Values{}
		for _, s := range q["ports"] {
			for _, part := range strings.Split(s, ",") {
				p, err := strconv.ParseUint(strings.TrimSpace(part), 10, 16)
				if err != nil || p == 0 {
					return "", nil, apierrors.NewBadRequest(fmt.Sprintf("invalid port %q: must be between 1 and 65535", part))
				}
				v.Add("port", strconv.FormatUint(p, 10))
			}
		}
		return "portForward", v, nil
	}
	return "", nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods/" + sub}, pod)
}

func boolQuery(q url.Values, name string) (bool, error) {
	s := q.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, apierrors.NewBadRequest(fmt.Sprintf("%s: invalid boolean %q", name, s))
	}
	return b, nil
}

func intQuery(q url.Values, name string) (*int64, error) {
	s := q.Get(name)
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: invalid integer %q", name, s))
	}
	return &n, nil
}

// logQuery validates PodLogOptions as upstream and writes the kubelet's
// containerLogs query.
func logQuery(q url.Values, pod string) (url.Values, error) {
	v := url.Values{}
	for _, p := range []string{"follow", "previous", "timestamps"} {
		on, err := boolQuery(q, p)
		if err != nil {
			return nil, err
		}
		if on {
			v.Set(p, "true")
		}
	}
	var errs field.ErrorList
	ints := map[string]int64{"sinceSeconds": 1, "tailLines": 0, "limitBytes": 1}
	for _, p := range []string{"sinceSeconds", "tailLines", "limitBytes"} {
		n, err := intQuery(q, p)
		if err != nil {
			return nil, err
		}
		if n == nil {
			continue
		}
		if *n < ints[p] {
			msg := "must be greater than 0"
			if ints[p] == 0 {
				msg = "must be greater than or equal to 0"
			}
			errs = append(errs, field.Invalid(field.NewPath(p), *n, msg))
		}
		v.Set(p, strconv.FormatInt(*n, 10))
	}
	if s := q.Get("sinceTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("sinceTime: %v", err))
		}
		if v.Get("sinceSeconds") != "" {
			errs = append(errs, field.Forbidden(field.NewPath("sinceTime"), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
		}
		v.Set("sinceTime", t.UTC().Format(time.RFC3339))
	}
	switch s := q.Get("stream"); s {
	case "", corev1.LogStreamAll:
	case corev1.LogStreamStdout, corev1.LogStreamStderr:
		if v.Get("tailLines") != "" {
			errs = append(errs, field.Forbidden(field.NewPath("stream"), "`tailLines` and specific `stream` are mutually exclusive for now"))
		}
		v.Set("stream", s)
	default:
		errs = append(errs, field.NotSupported(field.NewPath("stream"), s, []string{corev1.LogStreamStdout, corev1.LogStreamStderr, corev1.LogStreamAll}))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, pod, errs)
	}
	return v, nil
}

// podContainer picks the container a request is about, as kube-apiserver
// does: the named one (which must exist, init and ephemeral containers
// included), else the kubectl.kubernetes.io/default-container annotation,
// else the only container.
func podContainer(pod *corev1.Pod, name string) (string, error) {
	if name != "" {
		if !hasContainer(pod, name) {
			return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
		}
		return name, nil
	}
	if def := pod.Annotations["kubectl.kubernetes.io/default-container"]; def != "" && hasContainer(pod, def) {
		return def, nil
	}
	switch len(pod.Spec.Containers) {
	case 1:
		return pod.Spec.Containers[0].Name, nil
	case 0:
		return "", apierrors.NewBadRequest(fmt.Sprintf("pod %s has no containers", pod.Name))
	}
	msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, containerNames(pod.Spec.Containers))
	if len(pod.Spec.InitContainers) > 0 {
		msg += " or one of the init containers: " + containerNames(pod.Spec.InitContainers)
	}
	return "", apierrors.NewBadRequest(msg)
}

func containerNames(cs []corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return "[" + strings.Join(names, " ") + "]"
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}
