package stream

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	rcconst "k8s.io/apimachinery/pkg/util/remotecommand"
)

// pingPeriod keeps idle upgraded connections alive through proxies.
const pingPeriod = 5 * time.Second

// streamAndReply is a stream the client opened and the signal that the
// server's reply for it went out.
type streamAndReply struct {
	httpstream.Stream
	replySent <-chan struct{}
}

// streamCollector is an httpstream.NewStreamHandler handing the streams
// to the session goroutine.
func streamCollector(streams chan<- streamAndReply, done <-chan struct{}) httpstream.NewStreamHandler {
	return func(st httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case streams <- streamAndReply{Stream: st, replySent: replySent}:
			return nil
		case <-done:
			return errors.New("session closed")
		}
	}
}

// openSPDYSession upgrades to SPDY (remotecommand v1–v4) and waits for
// the client's streams.
func (s *Server) openSPDYSession(w http.ResponseWriter, r *http.Request, opts commandOptions) (*session, func(), error) {
	protocol, err := httpstream.Handshake(r, w, []string{rcconst.StreamProtocolV4Name, rcconst.StreamProtocolV3Name,
		rcconst.StreamProtocolV2Name, rcconst.StreamProtocolV1Name})
	if err != nil {
		return nil, nil, err // Handshake wrote the response
	}
	streams := make(chan streamAndReply, 8)
	done := make(chan struct{})
	conn := spdy.NewResponseUpgraderWithPings(pingPeriod).UpgradeResponse(w, r, streamCollector(streams, done))
	if conn == nil {
		close(done)
		return nil, nil, errors.New("SPDY upgrade failed")
	}
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	closeFn := func() {
		close(done)
		conn.Close()
	}
	want := 1 // the error stream
	for _, b := range []bool{opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY && protocol != rcconst.StreamProtocolV2Name && protocol != rcconst.StreamProtocolV1Name} {
		if b {
			want++
		}
	}
	chanDone := make(chan struct{})
	go func() { <-conn.CloseChan(); close(chanDone) }()
	sess := &session{done: chanDone}
	timeout := time.NewTimer(s.cfg.StreamCreationTimeout)
	defer timeout.Stop()
	var replies []<-chan struct{}
	for got := 0; got < want; got++ {
		select {
		case st := <-streams:
			replies = append(replies, st.replySent)
			if err := s.assignSPDYStream(sess, st, protocol); err != nil {
				closeFn()
				return nil, nil, err
			}
		case <-timeout.C:
			closeFn()
			return nil, nil, fmt.Errorf("timed out waiting for %d client streams", want)
		case <-chanDone:
			closeFn()
			return nil, nil, errors.New("connection closed before the streams were opened")
		}
	}
	for _, rs := range replies {
		select {
		case <-rs:
		case <-timeout.C:
			closeFn()
			return nil, nil, errors.New("timed out sending stream replies")
		}
	}
	if sess.writeStatus == nil {
		closeFn()
		return nil, nil, errors.New("the client opened no error stream")
	}
	return sess, closeFn, nil
}

func (s *Server) assignSPDYStream(sess *session, st streamAndReply, protocol string) error {
	switch t := st.Headers().Get(corev1.StreamType); t {
	case corev1.StreamTypeError:
		if protocol == rcconst.StreamProtocolV4Name {
			sess.writeStatus = statusJSONWriter(st)
		} else {
			sess.writeStatus = statusTextWriter(st)
		}
	case corev1.StreamTypeStdin:
		sess.stdin = st
	case corev1.StreamTypeStdout:
		sess.stdout = st
	case corev1.StreamTypeStderr:
		sess.stderr = st
	case corev1.StreamTypeResize:
		sess.resize = st
	default:
		return fmt.Errorf("unexpected stream type %q", t)
	}
	return nil
}
