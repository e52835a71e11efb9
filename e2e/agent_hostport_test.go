package e2e

// hostPort on a real agent, as upstream's conformance test "[sig-network]
// HostPort validates that there is no conflict between pods with same
// hostPort but different hostIP and protocol" drives it: three pods bound
// straight to one node with the same hostPort, on 127.0.0.1/TCP, on the
// node's address/TCP and on the node's address/UDP, each reached through
// its host port from the node itself (upstream uses a hostNetwork pod on
// that node; here a process in the node's network namespace) and each
// answering with its own name.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	// hpNS is the namespace of the test's pods.
	hpNS = "hostports"
	// hpPort is the host port all three pods publish.
	hpPort = 54321
)

// hpUDPServer answers every datagram with the pod's hostname, as
// agnhost netexec's UDP "hostname" command does: busybox's nc has no UDP.
// It is built static and handed to a busybox pod through a hostPath.
const hpUDPServer = `package main

import (
	"net"
	"os"
)

func main() {
	c, err := net.ListenPacket("udp", ":" + os.Args[1])
	if err != nil {
		panic(err)
	}
	name, _ := os.Hostname()
	buf := make([]byte, 512)
	for {
		_, peer, err := c.ReadFrom(buf)
		if err != nil {
			panic(err)
		}
		c.WriteTo([]byte(name+"\n"), peer)
	}
}
`

// hpBuildUDPServer builds hpUDPServer into a new directory and returns it.
func hpBuildUDPServer(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "skiff-udpserver-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(hpUDPServer), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "udpserver"), src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the UDP server: %v: %s", err, out)
	}
	return dir
}

// hpTCPPod serves its name over HTTP (/hostname) on 8080, published on
// hostIP:hpPort.
func hpTCPPod(name, node, hostIP string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[1]s}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && hostname > /www/hostname && exec httpd -f -p 8080 -h /www']
    ports: [{containerPort: 8080, hostPort: %[4]d, hostIP: "%[3]s", protocol: TCP}]
    readinessProbe: {httpGet: {path: /hostname, port: 8080}, periodSeconds: 1}
`, name, node, hostIP, hpPort)
}

// hpUDPPod answers its name on UDP 8080, published on hostIP:hpPort/UDP;
// its readiness is an HTTP server on 8008, as upstream's.
func hpUDPPod(name, node, hostIP, binDir string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[1]s}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 1
  volumes: [{name: bin, hostPath: {path: %[5]s, type: Directory}}]
  containers:
  - name: udp
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && hostname > /www/hostname && httpd -p 8008 -h /www && exec /udp/udpserver 8080']
    volumeMounts: [{name: bin, mountPath: /udp}]
    ports: [{containerPort: 8080, hostPort: %[4]d, hostIP: "%[3]s", protocol: UDP}]
    readinessProbe: {httpGet: {path: /hostname, port: 8008}, periodSeconds: 1}
`, name, node, hostIP, hpPort, binDir)
}

func TestAgentHostPort_SamePortDifferentHostIPAndProtocol_EachPodAnswersThroughItsOwn(t *testing.T) {
	bin := hpBuildUDPServer(t)
	c := newNetCluster(t, netClusterSpec{Agents: 1})
	c.waitNodesReady(2, 2*time.Minute)
	node := c.agents[0]
	nodeIP := node.IP.String()

	lcKubectl(t, c, "create", "namespace", hpNS)
	manifest := strings.Join([]string{
		hpTCPPod("pod1", node.Name, "127.0.0.1"),
		hpTCPPod("pod2", node.Name, nodeIP),
		hpUDPPod("pod3", node.Name, nodeIP, bin),
	}, "---\n")
	if out, errOut, err := c.kubectlIn(manifest, "apply", "-n", hpNS, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v: %s%s", err, out, errOut)
	}
	lcWait(t, c, 3*time.Minute, time.Second, "3 host port pods ready", func() (bool, string) {
		pods := lcPods(t, c, "-n", hpNS)
		ready := 0
		for i := range pods {
			if podCondition(&pods[i], "Ready") == "True" {
				ready++
			}
		}
		return ready == 3, fmt.Sprintf("%d/%d ready", ready, len(pods))
	}, func() string { return c.kubectlNoFail("get", "pods", "-n", hpNS, "-o", "wide") })

	port := fmt.Sprint(hpPort)
	checks := []struct {
		name, want string
		ask        func() (string, error)
	}{
		// Upstream binds curl to the node address (--interface): IPv6
		// has no route_localnet, and the same command serves both.
		{"TCP 127.0.0.1 from the node address", "pod1", func() (string, error) {
			return hpGet(node.NS, &net.TCPAddr{IP: node.IP}, net.JoinHostPort("127.0.0.1", port))
		}},
		// A plain client on the node starts from 127.0.0.1 itself.
		{"TCP 127.0.0.1 from 127.0.0.1", "pod1", func() (string, error) {
			return hpGet(node.NS, nil, net.JoinHostPort("127.0.0.1", port))
		}},
		{"TCP node address", "pod2", func() (string, error) {
			return hpGet(node.NS, nil, net.JoinHostPort(nodeIP, port))
		}},
		{"UDP node address", "pod3", func() (string, error) {
			return hpUDPAsk(node.NS, net.JoinHostPort(nodeIP, port))
		}},
	}
	for _, ck := range checks {
		var got string
		lcWait(t, c, 30*time.Second, 500*time.Millisecond, ck.name+" answers "+ck.want, func() (bool, string) {
			var err error
			got, err = ck.ask()
			return err == nil && got == ck.want, fmt.Sprintf("answer %q, error %v", got, err)
		}, func() string { return node.Name + "'s rules:\n" + svcNft(node) })
		t.Logf("host port %d, %s: answered by %s", hpPort, ck.name, got)
	}
	// The host port is not published on addresses it was not asked for:
	// UDP on 127.0.0.1 is nobody's.
	if got, err := hpUDPAsk(node.NS, net.JoinHostPort("127.0.0.1", port)); err == nil {
		t.Fatalf("UDP 127.0.0.1:%d answered %q, want no answer (only pod3 publishes UDP, on %s)", hpPort, got, nodeIP)
	}
}

// hpGet GETs http://addr/hostname from namespace ns, from local (nil: the
// kernel's choice), and returns the trimmed body.
func hpGet(ns string, local *net.TCPAddr, addr string) (string, error) {
	client := &http.Client{
		Timeout: 3 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, a string) (net.Conn, error) {
				var conn net.Conn
				err := inNetns(ns, func() error {
					d := &net.Dialer{}
					if local != nil {
						d.LocalAddr = local
					}
					var err error
					conn, err = d.DialContext(ctx, "tcp", a)
					return err
				})
				return conn, err
			},
			DisableKeepAlives: true,
		},
	}
	resp, err := client.Get("http://" + addr + "/hostname")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %q", resp.StatusCode, b)
	}
	return strings.TrimSpace(string(b)), nil
}

// hpUDPAsk sends "hostname" to addr over UDP from namespace ns and returns
// the trimmed answer (an error after 2 s without one).
func hpUDPAsk(ns, addr string) (string, error) {
	var conn net.Conn
	if err := inNetns(ns, func() error {
		var err error
		conn, err = net.Dial("udp", addr)
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hostname\n")); err != nil {
		return "", err
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", errors.New("empty answer")
	}
	return strings.TrimSpace(string(buf[:n])), nil
}
