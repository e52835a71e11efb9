package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	rcconst "k8s.io/apimachinery/pkg/util/remotecommand"

	"skiff/runtime/containers"
)

// commandOptions are what an exec or attach asks for.
type commandOptions struct {
	Command                    []string
	Stdin, Stdout, Stderr, TTY bool
}

func parseCommandOptions(r *http.Request, attach bool) (commandOptions, error) {
	q := r.URL.Query()
	o := commandOptions{
		Command: q["command"],
		Stdin:   boolParam(q, "stdin") || boolParam(q, "input"),
		Stdout:  boolParam(q, "stdout") || boolParam(q, "output"),
		Stderr:  boolParam(q, "stderr") || boolParam(q, "error"),
		TTY:     boolParam(q, "tty"),
	}
	if o.TTY && o.Stderr {
		o.Stderr = false // a terminal has one output stream, as the kubelet does
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	if !attach && len(o.Command) == 0 {
		return o, errors.New("you must specify at least one command for the container")
	}
	return o, nil
}

// session is one exec or attach connection, whatever the transport.
type session struct {
	stdin          io.Reader // nil when not asked for
	stdout, stderr io.Writer // nil when not asked for
	resize         io.Reader // nil without a TTY or a protocol without resize
	// writeStatus reports the end of the command on the error stream.
	writeStatus func(*apierrors.StatusError) error
	// done is closed when the client goes away.
	done <-chan struct{}
}

// remoteCommand serves exec or attach over WebSocket or SPDY.
func (s *Server) remoteCommand(attach bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns, pod, name := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
		opts, err := parseCommandOptions(r, attach)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ref, err := s.cfg.Pods.Container(ns, pod, name, false)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if !ref.Running {
			http.Error(w, fmt.Sprintf("container %s is not running in pod %s/%s", name, ns, pod), http.StatusBadRequest)
			return
		}
		var sess *session
		var closeFn func()
		if wsstream.IsWebSocketRequest(r) {
			sess, closeFn, err = s.openWebSocketSession(w, r, opts)
		} else {
			sess, closeFn, err = s.openSPDYSession(w, r, opts)
		}
		if err != nil {
			s.log.Debug("stream session not opened", "pod", ns+"/"+pod, "container", name, "err", err)
			return
		}
		defer closeFn()
		s.runCommand(r.Context(), ref.ID, attach, opts, sess)
	})
}

// runCommand runs the exec or attach and reports the outcome as the
// kubelet does: success, NonZeroExitCode with the ExitCode cause, or an
// internal error.
func (s *Server) runCommand(ctx context.Context, id string, attach bool, opts commandOptions, sess *session) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var resize chan containers.TermSize
	if opts.TTY && sess.resize != nil {
		resize = make(chan containers.TermSize, 4)
		go decodeResizes(ctx, sess.resize, resize)
	}
	var status *apierrors.StatusError
	if attach {
		err := s.cfg.Runtime.Attach(ctx, id, containers.AttachRequest{
			Stdin: sess.stdin, Stdout: sess.stdout, Stderr: sess.stderr, TTY: opts.TTY, Resize: resize})
		if err != nil {
			status = apierrors.NewInternalError(fmt.Errorf("error attaching to container: %w", err))
		}
	} else {
		code, err := s.cfg.Runtime.Exec(ctx, id, containers.ExecRequest{Cmd: opts.Command,
			Stdin: sess.stdin, Stdout: sess.stdout, Stderr: sess.stderr, TTY: opts.TTY, Resize: resize})
		switch {
		case err != nil:
			status = apierrors.NewInternalError(fmt.Errorf("error executing command in container: %w", err))
		case code != 0:
			status = exitStatus(code)
		}
	}
	if status == nil {
		status = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusSuccess}}
	}
	if err := sess.writeStatus(status); err != nil {
		s.log.Debug("writing the command status", "err", err)
	}
}

// exitStatus is the Status a non-zero exit code is reported with.
func exitStatus(code int) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Reason: rcconst.NonZeroExitCodeReason,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Type: rcconst.ExitCodeCauseType, Message: strconv.Itoa(code)},
		}},
		Message: fmt.Sprintf("command terminated with non-zero exit code: exit status %d", code),
	}}
}

// decodeResizes reads the JSON terminal sizes the client sends.
func decodeResizes(ctx context.Context, r io.Reader, out chan<- containers.TermSize) {
	defer close(out)
	dec := json.NewDecoder(r)
	for {
		var size struct{ Width, Height uint16 }
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case out <- containers.TermSize{Width: size.Width, Height: size.Height}:
		case <-ctx.Done():
			return
		}
	}
}

// statusJSONWriter writes the Status as JSON (protocol v4 and later).
func statusJSONWriter(w io.Writer) func(*apierrors.StatusError) error {
	return func(st *apierrors.StatusError) error {
		b, err := json.Marshal(st.Status())
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
}

// statusTextWriter writes a failure's message as text (protocols before v4).
func statusTextWriter(w io.Writer) func(*apierrors.StatusError) error {
	return func(st *apierrors.StatusError) error {
		if st.Status().Status == metav1.StatusSuccess {
			return nil
		}
		_, err := w.Write([]byte(st.Error()))
		return err
	}
}
