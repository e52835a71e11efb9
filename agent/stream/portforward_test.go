package stream

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// testNetNS creates a network namespace with loopback up and returns its path.
func testNetNS(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := "skiff-stream-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	return "/run/netns/" + name
}

// echoInNetNS listens on 127.0.0.1 inside the namespace and answers every
// line with "pod says: <line>"; the host cannot reach it directly.
func echoInNetNS(t *testing.T, nsPath string) uint16 {
	t.Helper()
	ln, err := inNetNS(nsPath, func() (net.Listener, error) { return net.Listen("tcp4", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "pod says: %s", line)
				}
			}()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	if c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), time.Second); err == nil {
		c.Close()
		t.Logf("note: port %d is also open on the host", port)
	}
	return port
}

func TestPortForward_ReachesThePodLoopbackInItsNetNS(t *testing.T) {
	ts := startTestServer(t)
	nsPath := testNetNS(t)
	ts.pods.netns["ns1/web"] = nsPath
	port := echoInNetNS(t, nsPath)
	cfg := ts.restConfig(t, DefaultClientCN)
	u, _ := url.Parse(ts.url + "/portForward/ns1/web")

	tests := []struct {
		name   string
		dialer func(t *testing.T, cfg *rest.Config) httpstream.Dialer
	}{
		{"spdy", func(t *testing.T, cfg *rest.Config) httpstream.Dialer {
			rt, up, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return spdy.NewDialer(up, &http.Client{Transport: rt}, http.MethodPost, u)
		}},
		{"spdy tunnelled in a websocket", func(t *testing.T, cfg *rest.Config) httpstream.Dialer {
			d, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop, ready := make(chan struct{}), make(chan struct{})
			errOut := &lockedBuffer{}
			fw, err := portforward.NewOnAddresses(tt.dialer(t, cfg), []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, errOut)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- fw.ForwardPorts() }()
			defer func() {
				close(stop)
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("ForwardPorts did not stop")
				}
			}()
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("ForwardPorts: %v (%s)", err, errOut.String())
			case <-time.After(10 * time.Second):
				t.Fatal("port forward not ready")
			}
			ports, err := fw.GetPorts()
			if err != nil || len(ports) != 1 {
				t.Fatalf("ports %v, %v", ports, err)
			}
			for i := range 2 { // two connections over one session
				c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(c, "hello %d\n", i)
				line, err := bufio.NewReader(c).ReadString('\n')
				c.Close()
				if want := fmt.Sprintf("pod says: hello %d\n", i); line != want {
					t.Fatalf("connection %d: read %q, %v; want %q", i, line, err, want)
				}
			}
		})
	}
}

// lockedBuffer collects what concurrent connections write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestPortForward_ChannelWebSocketProtocol(t *testing.T) {
	ts := startTestServer(t)
	nsPath := testNetNS(t)
	ts.pods.netns["ns1/web"] = nsPath
	port := echoInNetNS(t, nsPath)
	d := websocket.Dialer{TLSClientConfig: ts.tlsConfig(t, DefaultClientCN), Subprotocols: []string{"v4.channel.k8s.io"}, HandshakeTimeout: 5 * time.Second}
	wsURL := strings.Replace(ts.url, "https://", "wss://", 1) + "/portForward/ns1/web?port=" + strconv.Itoa(int(port))
	ws, resp, err := d.Dial(wsURL, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for want := range 2 { // data, then error channel, each opens with the port
		_, msg, err := ws.ReadMessage()
		if err != nil || len(msg) != 3 || int(msg[0]) != want || binary.LittleEndian.Uint16(msg[1:]) != port {
			t.Fatalf("opening message %v, %v; want channel %d with port %d", msg, err, want, port)
		}
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, append([]byte{0}, "over websocket\n"...)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for !bytes.HasSuffix(got, []byte("\n")) {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v (got %q)", err, got)
		}
		if msg[0] != 0 {
			t.Fatalf("message on channel %d: %q", msg[0], msg[1:])
		}
		got = append(got, msg[1:]...)
	}
	if string(got) != "pod says: over websocket\n" {
		t.Fatalf("got %q", got)
	}
}

func TestPortForward_ReportsAClosedPortOnTheErrorStream(t *testing.T) {
	ts := startTestServer(t)
	nsPath := testNetNS(t)
	ts.pods.netns["ns1/web"] = nsPath
	cfg := ts.restConfig(t, DefaultClientCN)
	u, _ := url.Parse(ts.url + "/portForward/ns1/web")
	rt, up, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := spdy.NewDialer(up, &http.Client{Transport: rt}, http.MethodPost, u).Dial("portforward.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := http.Header{}
	h.Set("streamType", "error")
	h.Set("port", "1")
	h.Set("requestID", "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	h.Set("streamType", "data")
	data, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	msg := make(chan string, 1)
	go func() { b, _ := io.ReadAll(errStream); msg <- string(b) }()
	select {
	case m := <-msg:
		if !strings.Contains(m, "error forwarding port 1 to pod ns1/web") || !strings.Contains(m, "connection refused") {
			t.Fatalf("error stream says %q", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error reported")
	}
}
