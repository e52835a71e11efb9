package apiserver_test

import (
	"crypto/tls"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestPodLog_WebSocketClientsGetTheLogFramedByTheAPIServer(t *testing.T) {
	env := newProxyEnv(t)
	env.pod(t, "p", "node-a", nil, "only")
	tests := []struct {
		name      string
		protocols []string
		wantProto string
		wantType  int
		decode    func([]byte) string
	}{
		{"binary.k8s.io sends raw bytes", []string{"binary.k8s.io"}, "binary.k8s.io", websocket.BinaryMessage, func(b []byte) string { return string(b) }},
		{"base64.binary.k8s.io sends base64 text", []string{"base64.binary.k8s.io"}, "base64.binary.k8s.io", websocket.TextMessage, func(b []byte) string {
			d, err := base64.StdEncoding.DecodeString(string(b))
			if err != nil {
				t.Fatalf("message %q is not base64", b)
			}
			return string(d)
		}},
		{"no protocol is binary", nil, "", websocket.BinaryMessage, func(b []byte) string { return string(b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Subprotocols: tt.protocols, HandshakeTimeout: 5 * time.Second}
			u := strings.Replace(env.url, "https://", "wss://", 1) + "/api/v1/namespaces/default/pods/p/log?container=only"
			ws, resp, err := d.Dial(u, http.Header{"Authorization": {"Bearer x"}})
			if err != nil {
				t.Fatalf("dial: %v %v", err, resp)
			}
			defer ws.Close()
			if ws.Subprotocol() != tt.wantProto {
				t.Fatalf("subprotocol %q, want %q", ws.Subprotocol(), tt.wantProto)
			}
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			var got strings.Builder
			for {
				typ, msg, err := ws.ReadMessage()
				if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					break
				}
				if err != nil {
					t.Fatalf("read after %q: %v", got.String(), err)
				}
				if typ != tt.wantType {
					t.Fatalf("message type %d, want %d", typ, tt.wantType)
				}
				got.WriteString(tt.decode(msg))
			}
			if got.String() != "log line\n" {
				t.Fatalf("log %q, want %q", got.String(), "log line\n")
			}
			if call := env.kubelet.last(t); call.path != "/containerLogs/default/p/only" {
				t.Fatalf("agent saw %s", call.path)
			}
		})
	}
}

func TestPodLog_WebSocketErrorsAreStatusResponses(t *testing.T) {
	env := newProxyEnv(t)
	env.pod(t, "p", "node-a", nil, "only")
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, HandshakeTimeout: 5 * time.Second}
	base := strings.Replace(env.url, "https://", "wss://", 1) + "/api/v1/namespaces/default/pods/"
	tests := []struct {
		name, path string
		protocols  []string
		wantCode   int
	}{
		{"missing pod", "nope/log", []string{"binary.k8s.io"}, http.StatusNotFound},
		{"unsupported protocol", "p/log", []string{"v5.channel.k8s.io"}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.Subprotocols = tt.protocols
			ws, resp, err := d.Dial(base+tt.path, nil)
			if err == nil {
				ws.Close()
				t.Fatal("the upgrade succeeded")
			}
			if resp == nil || resp.StatusCode != tt.wantCode {
				t.Fatalf("response %v, want status %d", resp, tt.wantCode)
			}
		})
	}
}
