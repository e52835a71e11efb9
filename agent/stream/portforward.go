package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	pfconst "k8s.io/apimachinery/pkg/util/portforward"
)

// dialer connects to a port of the pod.
type dialer func(ctx context.Context, port uint16) (net.Conn, error)

// servePortForward forwards connections to the pod's ports over SPDY, SPDY
// tunnelled in a WebSocket, or the channel WebSocket protocol.
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	nsPath, err := s.cfg.Pods.PodNetNS(ns, pod)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	dial := func(ctx context.Context, port uint16) (net.Conn, error) { return dialPod(ctx, nsPath, port) }
	target := ns + "/" + pod
	switch {
	case wsstream.IsWebSocketRequestWithTunnelingProtocol(r):
		s.portForwardTunnel(w, r, target, dial)
	case wsstream.IsWebSocketRequest(r):
		s.portForwardWebSocket(w, r, target, dial)
	default:
		s.portForwardSPDY(w, r, target, dial)
	}
}

func (s *Server) portForwardSPDY(w http.ResponseWriter, r *http.Request, target string, dial dialer) {
	if _, err := httpstream.Handshake(r, w, []string{pfconst.PortForwardV1Name}); err != nil {
		return // Handshake wrote the response
	}
	streams := make(chan streamAndReply, 16)
	done := make(chan struct{})
	defer close(done)
	conn := spdy.NewResponseUpgraderWithPings(pingPeriod).UpgradeResponse(w, r, streamCollector(streams, done))
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	s.forwardSPDYStreams(r.Context(), conn, streams, target, dial)
}

// portForwardTunnel serves SPDY portforward.k8s.io inside a WebSocket
// (subprotocol SPDY/3.1+portforward.k8s.io), what kubectl ≥ 1.31 asks for.
func (s *Server) portForwardTunnel(w http.ResponseWriter, r *http.Request, target string, dial dialer) {
	up := websocket.Upgrader{
		Subprotocols:    []string{pfconst.WebsocketsSPDYTunnelingPortForwardV1},
		CheckOrigin:     func(*http.Request) bool { return true },
		ReadBufferSize:  32 << 10,
		WriteBufferSize: 32 << 10,
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade wrote the response
	}
	if ws.Subprotocol() != pfconst.WebsocketsSPDYTunnelingPortForwardV1 {
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseProtocolError, "unsupported subprotocol"), time.Now().Add(time.Second))
		ws.Close()
		return
	}
	nc := &wsNetConn{ws: ws}
	streams := make(chan streamAndReply, 16)
	done := make(chan struct{})
	defer close(done)
	conn, err := spdy.NewServerConnectionWithPings(nc, streamCollector(streams, done), pingPeriod)
	if err != nil {
		nc.Close()
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	s.forwardSPDYStreams(r.Context(), conn, streams, target, dial)
}

// pfPair is the data and error streams of one forwarded connection.
type pfPair struct {
	data, errs       httpstream.Stream
	dataRep, errsRep <-chan struct{}
	timer            *time.Timer
}

// forwardSPDYStreams pairs the client's streams by requestID and forwards
// each complete pair, until the connection closes.
func (s *Server) forwardSPDYStreams(ctx context.Context, conn httpstream.Connection, streams <-chan streamAndReply, target string, dial dialer) {
	var wg sync.WaitGroup
	defer wg.Wait()
	// Cancelled before the wait: forwarded connections close with the session.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	pairs := map[string]*pfPair{}
	for {
		var st streamAndReply
		select {
		case <-conn.CloseChan():
			return
		case st = <-streams:
		}
		id := requestID(st)
		mu.Lock()
		p := pairs[id]
		if p == nil {
			p = &pfPair{}
			pairs[id] = p
			p.timer = time.AfterFunc(s.cfg.StreamCreationTimeout, func() {
				mu.Lock()
				defer mu.Unlock()
				if pairs[id] == p {
					delete(pairs, id)
					resetPair(conn, p)
				}
			})
		}
		switch st.Headers().Get(corev1.StreamType) {
		case corev1.StreamTypeData:
			p.data, p.dataRep = st.Stream, st.replySent
		case corev1.StreamTypeError:
			p.errs, p.errsRep = st.Stream, st.replySent
		default:
			st.Reset()
		}
		complete := p.data != nil && p.errs != nil
		if complete {
			delete(pairs, id)
			p.timer.Stop()
		}
		mu.Unlock()
		if complete {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.forwardPair(ctx, conn, p, target, dial)
			}()
		}
	}
}

func resetPair(conn httpstream.Connection, p *pfPair) {
	for _, st := range []httpstream.Stream{p.data, p.errs} {
		if st != nil {
			st.Reset()
		}
	}
	conn.RemoveStreams(p.data, p.errs)
}

// requestID pairs streams; clients older than kubectl 1.4 sent none, and
// opened the error stream right before the data stream.
func requestID(st streamAndReply) string {
	if id := st.Headers().Get(corev1.PortForwardRequestIDHeader); id != "" {
		return id
	}
	if st.Headers().Get(corev1.StreamType) == corev1.StreamTypeData {
		return strconv.Itoa(int(st.Identifier()) - 2)
	}
	return strconv.Itoa(int(st.Identifier()))
}

func (s *Server) forwardPair(ctx context.Context, conn httpstream.Connection, p *pfPair, target string, dial dialer) {
	defer conn.RemoveStreams(p.data, p.errs)
	defer p.errs.Close()
	defer p.data.Close()
	for _, rep := range []<-chan struct{}{p.dataRep, p.errsRep} {
		select {
		case <-rep:
		case <-ctx.Done():
			return
		}
	}
	portStr := p.data.Headers().Get(corev1.PortHeader)
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err == nil && port == 0 {
		err = errors.New("port 0")
	}
	if err == nil {
		err = forward(ctx, dial, uint16(port), p.data)
	}
	if err != nil {
		msg := fmt.Sprintf("error forwarding port %s to pod %s: %v", portStr, target, err)
		s.log.Debug("port forward failed", "pod", target, "port", portStr, "err", err)
		fmt.Fprint(p.errs, msg)
	}
}

// forward copies between the client's stream and a new connection to the
// pod's port until the pod's side is done or the client goes away.
func forward(ctx context.Context, dial dialer, port uint16, client io.ReadWriter) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := dial(dctx, port)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	go func() {
		_, err := io.Copy(conn, client)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite() // the client is done sending: pass the EOF on
		} else {
			conn.Close()
		}
	}()
	_, err = io.Copy(client, conn)
	if err != nil && (errors.Is(err, net.ErrClosed) || ctx.Err() != nil) {
		return nil
	}
	return err
}

// portForwardWebSocket serves the channel WebSocket protocol: the ports
// are in the query, and each has a data and an error channel whose first
// message is the port number (two bytes, little endian).
func (s *Server) portForwardWebSocket(w http.ResponseWriter, r *http.Request, target string, dial dialer) {
	var ports []uint16
	for _, v := range r.URL.Query()[corev1.PortHeader] {
		for _, part := range strings.Split(v, ",") {
			p, err := strconv.ParseUint(strings.TrimSpace(part), 10, 16)
			if err != nil || p == 0 {
				http.Error(w, fmt.Sprintf("invalid port %q", part), http.StatusBadRequest)
				return
			}
			ports = append(ports, uint16(p))
		}
	}
	if len(ports) == 0 {
		http.Error(w, `query parameter "port" is required`, http.StatusBadRequest)
		return
	}
	channels := make([]wsstream.ChannelType, 0, 2*len(ports))
	for range ports {
		channels = append(channels, wsstream.ReadWriteChannel, wsstream.WriteChannel)
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		"":         {Binary: true, Channels: channels},
		wsV4Binary: {Binary: true, Channels: channels},
		wsV4Base64: {Binary: false, Channels: channels},
	})
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		return
	}
	defer conn.Close()
	for i, p := range ports {
		b := binary.LittleEndian.AppendUint16(nil, p)
		streams[2*i].Write(b)
		streams[2*i+1].Write(b)
	}
	var wg sync.WaitGroup
	for i, p := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := forward(r.Context(), dial, p, streams[2*i]); err != nil {
				fmt.Fprintf(streams[2*i+1], "error forwarding port %d to pod %s: %v", p, target, err)
			}
		}()
	}
	wg.Wait()
}
