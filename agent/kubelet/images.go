package kubelet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/runtime/images"
)

// Waiting reasons of image pulls, as upstream.
const (
	reasonErrImagePull      = "ErrImagePull"
	reasonImagePullBackOff  = "ImagePullBackOff"
	reasonErrImageNeverPull = "ErrImageNeverPull"
	reasonInvalidImageName  = "InvalidImageName"
)

// pullPolicy is the container's policy, defaulted as the API server does.
func pullPolicy(c *corev1.Container) corev1.PullPolicy {
	return defaultPullPolicy(c.ImagePullPolicy, c.Image)
}

// defaultPullPolicy is policy, or when empty the API server's default for
// ref: Always for :latest or no tag, else IfNotPresent.
func defaultPullPolicy(policy corev1.PullPolicy, ref string) corev1.PullPolicy {
	if policy != "" {
		return policy
	}
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return corev1.PullIfNotPresent
	}
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash || strings.HasSuffix(ref, ":latest") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// pullError is a failed Ensure with the waiting state it gives.
type pullError struct {
	reason, message string
	err             error
}

func (e *pullError) Error() string { return e.message }
func (e *pullError) Unwrap() error { return e.err }

// ensureImage makes the container's image present, honouring the pull
// policy and the pull back-off; the error is a *pullError.
func (w *podWorker) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (images.Image, error) {
	if c.Image == "" {
		return images.Image{}, &pullError{reason: reasonInvalidImageName, message: "container has no image"}
	}
	return w.pullImage(ctx, pod, "pull/"+string(pod.UID)+"/"+c.Name, c.Image, pullPolicy(c))
}

// pullImage makes image ref present as policy asks, with the pull back-off
// of key and upstream's events; the error is a *pullError. Container
// images and image volumes (imagevolumes.go) share it, as upstream's
// image puller.
func (w *podWorker) pullImage(ctx context.Context, pod *corev1.Pod, key, ref string, policy corev1.PullPolicy) (images.Image, error) {
	k := w.k
	if last, ok := k.backoff.lastUpdate(key); ok {
		if in, _, remaining := k.backoff.inBackoffSince(key, last); in {
			msg := fmt.Sprintf("Back-off pulling image %q", ref)
			k.event(pod, corev1.EventTypeNormal, "BackOff", "%s", msg)
			w.wakeIn(remaining)
			return images.Image{}, &pullError{reason: reasonImagePullBackOff, message: msg}
		}
	}
	creds := k.pullCredentials(ctx, pod)
	img, err := k.cfg.Images.Ensure(ctx, ref, policy, creds)
	if err != nil {
		if errors.Is(err, images.ErrNotPresent) && policy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", ref)
			k.event(pod, corev1.EventTypeWarning, reasonErrImageNeverPull, "%s", msg)
			return images.Image{}, &pullError{reason: reasonErrImageNeverPull, message: msg, err: err}
		}
		k.backoff.next(key)
		msg := fmt.Sprintf("Failed to pull image %q: %v", ref, err)
		k.event(pod, corev1.EventTypeWarning, "Failed", "%s", msg)
		k.event(pod, corev1.EventTypeWarning, "Failed", "Error: %s", reasonErrImagePull)
		w.wakeIn(backoffInitial)
		return images.Image{}, &pullError{reason: reasonErrImagePull, message: msg, err: err}
	}
	k.backoff.forget(key)
	if policy == corev1.PullAlways {
		k.event(pod, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q", ref)
	} else {
		k.event(pod, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", ref)
	}
	return img, nil
}

// pullCredentials reads the pod's imagePullSecrets (dockerconfigjson and
// dockercfg); unreadable secrets are skipped, as upstream.
func (k *Kubelet) pullCredentials(ctx context.Context, pod *corev1.Pod) []images.Credential {
	var out []images.Credential
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := k.cfg.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			k.log.Warn("image pull secret unreadable", "pod", pod.Namespace+"/"+pod.Name, "secret", ref.Name, "err", err)
			continue
		}
		out = append(out, parseDockerConfig(s)...)
	}
	return out
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

func parseDockerConfig(s *corev1.Secret) []images.Credential {
	var auths map[string]dockerAuth
	if b, ok := s.Data[corev1.DockerConfigJsonKey]; ok {
		var cfg struct {
			Auths map[string]dockerAuth `json:"auths"`
		}
		if json.Unmarshal(b, &cfg) == nil {
			auths = cfg.Auths
		}
	} else if b, ok := s.Data[corev1.DockerConfigKey]; ok {
		_ = json.Unmarshal(b, &auths)
	}
	var out []images.Credential
	for reg, a := range auths {
		if a.Username == "" && a.Auth != "" {
			if raw, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
				a.Username, a.Password, _ = strings.Cut(string(raw), ":")
			}
		}
		reg = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(reg, "https://"), "http://"), "/")
		out = append(out, images.Credential{Registry: reg, Username: a.Username, Password: a.Password})
	}
	return out
}
