package kubelet

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"skiff/runtime/containers"
	"skiff/runtime/crilog"
)

// Upstream's bounds (pkg/kubelet/container): the termination message file
// is read up to its last 4 KiB; the log fallback is the last 80 lines, at
// most their last 2 KiB.
const (
	maxTerminationMessageBytes = 4 * 1024
	maxTerminationLogBytes     = 2 * 1024
	maxTerminationLogLines     = 80
)

// terminationFile is the host file behind a container attempt's
// terminationMessagePath: beside its log, so pruning an attempt and
// removing the pod's log directory take it too, and a restarted agent
// finds it again from the log path alone.
func terminationFile(logPath string) string {
	return strings.TrimSuffix(logPath, ".log") + ".termination-log"
}

// terminationMount creates the (empty) termination message file of an
// attempt and returns its bind mount at terminationMessagePath. The file
// is mode 0666 as upstream's, so any container user can write it (the
// path is usually under /dev, which only root may create files in).
func terminationMount(c *corev1.Container, logPath string) (containers.Mount, bool, error) {
	if c.TerminationMessagePath == "" {
		return containers.Mount{}, false, nil
	}
	p := terminationFile(logPath)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if err != nil {
		return containers.Mount{}, false, err
	}
	if err := f.Close(); err != nil {
		return containers.Mount{}, false, err
	}
	// The umask narrowed the mode given to open.
	if err := os.Chmod(p, 0o666); err != nil {
		return containers.Mount{}, false, err
	}
	target := c.TerminationMessagePath
	if !path.IsAbs(target) {
		target = "/" + target
	}
	return containers.Mount{HostPath: p, ContainerPath: target}, true, nil
}

// terminationMessage is upstream's state.terminated.message of an exited
// container: what it wrote to terminationMessagePath (the last 4 KiB);
// with policy FallbackToLogsOnError, a container that failed (exit code
// not 0) and left that file empty or missing reports the tail of its log
// instead. A container that succeeded never falls back.
func terminationMessage(ctx context.Context, c *corev1.Container, st containers.ContainerStatus, logPath string) string {
	fallback := c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError &&
		st.ExitCode != 0 && st.Reason != "ContainerCannotRun"
	if c.TerminationMessagePath != "" && logPath != "" {
		p := terminationFile(logPath)
		data, err := readTail(p, maxTerminationMessageBytes)
		switch {
		case err == nil && len(data) > 0:
			return string(data)
		case err != nil && !os.IsNotExist(err):
			return fmt.Sprintf("Error on reading termination log %s: %v", p, err)
		}
	}
	if !fallback || logPath == "" {
		return ""
	}
	return lastLogLines(ctx, logPath)
}

// readTail reads the last max bytes of the file at p.
func readTail(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := fi.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// lastLogLines is upstream's readLastStringFromContainerLogs: the last 80
// lines of the container's log, of which the last 2 KiB are kept.
func lastLogLines(ctx context.Context, logPath string) string {
	lines := int64(maxTerminationLogLines)
	buf := &tailBuffer{max: maxTerminationLogBytes}
	if err := crilog.Read(ctx, logPath, crilog.ReadOptions{TailLines: &lines}, buf); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(buf.b)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.b = append(t.b[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if drop := len(t.b) + len(p) - t.max; drop > 0 {
		t.b = append(t.b[:0], t.b[drop:]...)
	}
	t.b = append(t.b, p...)
	return n, nil
}

// noteTermination computes the termination message of an attempt once it
// has exited (the file and log do not change after that), from the spec
// the pod has now: the path and policy cannot change in a pod's life.
func (w *podWorker) noteTermination(ctx context.Context, r *ctrRecord) {
	w.mu.Lock()
	pod, exited, done := w.pod, r.status.State == containers.StateExited, r.termRead
	st := r.status
	w.mu.Unlock()
	if !exited || done || pod == nil {
		return
	}
	c := specOf(pod, r.name)
	if c == nil {
		return
	}
	msg := terminationMessage(ctx, c, st, r.logPath)
	w.setField(func() { r.termMsg, r.termRead = msg, true })
}
