package stream

import (
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	rcconst "k8s.io/apimachinery/pkg/util/remotecommand"
)

// WebSocket subprotocols of remotecommand: the unversioned ones speak
// the v1–v3 semantics (error as text), v4 adds Status JSON, v5 the CLOSE
// signal that half-closes stdin.
const (
	wsV4Binary = "v4." + wsstream.ChannelWebSocketProtocol
	wsV4Base64 = "v4." + wsstream.Base64ChannelWebSocketProtocol
	wsV5Binary = rcconst.StreamProtocolV5Name
)

func readChannel(on bool) wsstream.ChannelType {
	if on {
		return wsstream.ReadChannel
	}
	return wsstream.IgnoreChannel
}

func writeChannel(on bool) wsstream.ChannelType {
	if on {
		return wsstream.WriteChannel
	}
	return wsstream.IgnoreChannel
}

// openWebSocketSession upgrades to a channel WebSocket: channel 0 stdin,
// 1 stdout, 2 stderr, 3 error, 4 resize.
func (s *Server) openWebSocketSession(w http.ResponseWriter, r *http.Request, opts commandOptions) (*session, func(), error) {
	channels := []wsstream.ChannelType{
		rcconst.StreamStdIn:  readChannel(opts.Stdin),
		rcconst.StreamStdOut: writeChannel(opts.Stdout),
		rcconst.StreamStdErr: writeChannel(opts.Stderr),
		rcconst.StreamErr:    wsstream.WriteChannel,
		rcconst.StreamResize: wsstream.ReadChannel,
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		"":                                      {Binary: true, Channels: channels},
		wsstream.ChannelWebSocketProtocol:       {Binary: true, Channels: channels},
		wsstream.Base64ChannelWebSocketProtocol: {Binary: false, Channels: channels},
		wsV4Binary:                              {Binary: true, Channels: channels},
		wsV4Base64:                              {Binary: false, Channels: channels},
		wsV5Binary:                              {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	protocol, streams, err := conn.Open(w, r)
	if err != nil {
		return nil, nil, err
	}
	if len(streams) != len(channels) {
		conn.Close()
		return nil, nil, errors.New("websocket channels not opened")
	}
	// An empty message on the lowest writable channel tells the client the
	// session is up, as the kubelet does.
	switch {
	case opts.Stdout:
		streams[rcconst.StreamStdOut].Write(nil)
	case opts.Stderr:
		streams[rcconst.StreamStdErr].Write(nil)
	default:
		streams[rcconst.StreamErr].Write(nil)
	}
	done := make(chan struct{})
	sess := &session{done: done}
	if opts.Stdin {
		sess.stdin = streams[rcconst.StreamStdIn]
	}
	if opts.Stdout {
		sess.stdout = streams[rcconst.StreamStdOut]
	}
	if opts.Stderr {
		sess.stderr = streams[rcconst.StreamStdErr]
	}
	if opts.TTY {
		sess.resize = streams[rcconst.StreamResize]
	}
	switch protocol {
	case wsV4Binary, wsV4Base64, wsV5Binary:
		sess.writeStatus = statusJSONWriter(streams[rcconst.StreamErr])
	default:
		sess.writeStatus = statusTextWriter(streams[rcconst.StreamErr])
	}
	closeFn := func() {
		close(done)
		conn.Close()
	}
	return sess, closeFn, nil
}
