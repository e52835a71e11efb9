package apiserver

import (
	"context"

	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"skiff/server/auth"
)

// admitConnect runs admission for pods/exec, attach and portforward with
// operation CONNECT and the request's options as the object, as upstream
// does before it connects (so a webhook can refuse `kubectl attach`).
func (s *Server) admitConnect(ctx context.Context, q *request) error {
	opts := connectOptions(q.info.Subresource, q.r.URL.Query())
	if opts == nil {
		return nil
	}
	ctx = withWarner(ctx, q.w) // warnings.go
	a := AdmissionAttributes{Op: OpConnect, Resource: q.res, Subresource: q.info.Subresource, Object: opts, User: auth.UserFrom(ctx),
		Name: q.info.Name, Namespace: q.info.Namespace}
	for _, p := range s.cfg.Admission {
		if err := p.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// connectOptions are the typed options of a connect request, as upstream
// decodes them for admission. The query was checked by kubeletQuery.
func connectOptions(sub string, q url.Values) runtime.Object {
	flag := func(name string) bool { b, _ := boolQuery(q, name); return b }
	switch sub {
	case "exec":
		return &corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"},
			Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"), Container: q.Get("container"), Command: q["command"]}
	case "attach":
		return &corev1.PodAttachOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodAttachOptions"},
			Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"), Container: q.Get("container")}
	case "portforward":
		o := &corev1.PodPortForwardOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodPortForwardOptions"}}
		for _, s := range q["ports"] {
			for _, part := range strings.Split(s, ",") {
				if p, err := strconv.ParseUint(strings.TrimSpace(part), 10, 16); err == nil {
					o.Ports = append(o.Ports, int32(p))
				}
			}
		}
		return o
	}
	return nil
}
