package apiserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The protocols pods/log speaks over a WebSocket (upstream's
// wsstream.NewDefaultReaderProtocols): raw bytes in binary messages, or
// base64 in text messages. No protocol at all means binary.
const (
	logProtoBinary = "binary.k8s.io"
	logProtoBase64 = "base64.binary.k8s.io"
)

// logWriteTimeout bounds one message to a client that stopped reading.
const logWriteTimeout = time.Minute

// logsOverWebSocket serves pods/log to a WebSocket client as
// kube-apiserver does: the API server reads the log from the agent as an
// ordinary response and frames it itself (the kubelet's containerLogs is
// no WebSocket endpoint). Errors before the upgrade are Status responses.
func (kp *KubeletProxy) logsOverWebSocket(w http.ResponseWriter, r *http.Request, target *url.URL, log *slog.Logger) {
	proto, ok := logProtocol(websocket.Subprotocols(r))
	if !ok {
		writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("none of the requested WebSocket protocols %v is supported; use %s or %s", websocket.Subprotocols(r), logProtoBinary, logProtoBase64)))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	resp, err := kp.transport.RoundTrip(req)
	if err != nil {
		log.Debug("agent unreachable", "url", target.Redacted(), "err", err)
		writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("error dialing backend: %v", err)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		writeError(w, r, backendError(resp))
		return
	}
	var hdr http.Header
	if proto != "" {
		hdr = http.Header{"Sec-Websocket-Protocol": {proto}}
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(w, r, hdr)
	if err != nil {
		return // the upgrader has answered the client
	}
	defer ws.Close()
	// The client sends nothing but control frames; reading handles them
	// and notices the client going away, which ends the agent request.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer cancel()
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	err = copyLogMessages(ws, resp.Body, proto == logProtoBase64)
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	if err != nil && ctx.Err() == nil {
		log.Debug("pod log websocket ended", "url", target.Redacted(), "err", err)
		msg = websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "log stream failed")
	}
	_ = ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	ws.Close()
	<-readerDone
}

// logProtocol picks the first protocol the client offers that pods/log
// speaks; a client that offers none gets binary.
func logProtocol(offered []string) (string, bool) {
	if len(offered) == 0 {
		return "", true
	}
	for _, p := range offered {
		if p == logProtoBinary || p == logProtoBase64 {
			return p, true
		}
	}
	return "", false
}

// copyLogMessages sends an empty message first, as upstream does (a
// client learns the stream is open before the first line), then each
// chunk read from the log as one message.
func copyLogMessages(ws *websocket.Conn, r io.Reader, b64 bool) error {
	send := func(p []byte) error {
		ws.SetWriteDeadline(time.Now().Add(logWriteTimeout))
		if b64 {
			return ws.WriteMessage(websocket.TextMessage, []byte(base64.StdEncoding.EncodeToString(p)))
		}
		return ws.WriteMessage(websocket.BinaryMessage, p)
	}
	if err := send(nil); err != nil {
		return err
	}
	buf := make([]byte, 2048)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := send(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
