package nft

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// trafficLab is a node namespace holding the table and a pod namespace
// behind a veth, with two pod addresses answering on 8080 and 8081.
type trafficLab struct {
	node, pod string
}

const (
	nodeIP = "10.244.1.1"
	podIP1 = "10.244.1.5"
	podIP2 = "10.244.1.6"
)

func newTrafficLab(t *testing.T) trafficLab {
	t.Helper()
	l := trafficLab{node: addNS(t, "node"), pod: addNS(t, "pod")}
	run(t, "ip", "-n", l.node, "link", "add", "vpod", "type", "veth", "peer", "name", "eth0", "netns", l.pod)
	run(t, "ip", "-n", l.node, "addr", "add", nodeIP+"/24", "dev", "vpod")
	run(t, "ip", "-n", l.node, "link", "set", "vpod", "up")
	// Locally sent packets need a route before the nat output hook
	// rewrites their destination.
	run(t, "ip", "-n", l.node, "route", "add", "10.96.0.0/12", "dev", "vpod")
	for _, a := range []string{podIP1, podIP2} {
		run(t, "ip", "-n", l.pod, "addr", "add", a+"/24", "dev", "eth0")
	}
	run(t, "ip", "-n", l.pod, "link", "set", "eth0", "up")
	run(t, "ip", "-n", l.pod, "route", "add", "default", "via", nodeIP)
	for _, port := range []string{"8080", "8081"} {
		l.serve(t, port)
	}
	return l
}

// serve answers every connection to the pod's port with the address it
// arrived on (which endpoint was picked).
func (l trafficLab) serve(t *testing.T, port string) {
	t.Helper()
	var ln net.Listener
	if err := inNS(t, l.pod, func() (err error) {
		ln, err = net.Listen("tcp4", ":"+port)
		return err
	}); err != nil {
		t.Fatalf("listen in pod: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(c.LocalAddr().String() + "\n"))
			_ = c.Close()
		}
	}()
}

// dial connects from the node to addr and returns the endpoint that
// answered.
func (l trafficLab) dial(t *testing.T, addr string) (string, error) {
	t.Helper()
	var c net.Conn
	if err := inNS(t, l.node, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestApply_Traffic_VirtualIPsReachPodsAndEmptyServiceRefuses(t *testing.T) {
	l := newTrafficLab(t)
	ep1 := endpoint{ip: podIP1, port: 8080, local: true}
	ep2 := endpoint{ip: podIP2, port: 8081, local: true}
	services := []svcPort{
		{ns: "t", name: "one", portName: "http", proto: TCP, clusterIP: "10.96.0.10", port: 80, eps: []endpoint{ep1}},
		{ns: "t", name: "two", portName: "http", proto: TCP, clusterIP: "10.96.0.11", port: 80, eps: []endpoint{ep1, ep2}},
		{ns: "t", name: "sticky", portName: "http", proto: TCP, clusterIP: "10.96.0.12", port: 80,
			affinity: time.Hour, eps: []endpoint{ep1, ep2}},
		{ns: "t", name: "np", portName: "http", proto: TCP, clusterIP: "10.96.0.13", port: 80, nodePort: 30080, eps: []endpoint{ep2}},
		{ns: "t", name: "empty", portName: "http", proto: TCP, clusterIP: "10.96.0.40", port: 80},
	}
	mustApply(t, openIn(t, l.node), fullSync(services))

	t.Run("cluster IP DNATs to the endpoint, port included", func(t *testing.T) {
		got, err := l.dial(t, "10.96.0.10:80")
		if err != nil || got != podIP1+":8080" {
			t.Fatalf("dial 10.96.0.10:80 = %q, %v; want answered by %s:8080", got, err, podIP1)
		}
	})
	t.Run("numgen spreads connections over both endpoints", func(t *testing.T) {
		seen := map[string]int{}
		for i := 0; i < 24; i++ { // both seen unless 24 coin flips agree (p = 1e-7)
			got, err := l.dial(t, "10.96.0.11:80")
			if err != nil {
				t.Fatalf("dial %d: %v", i, err)
			}
			seen[got]++
		}
		if seen[podIP1+":8080"] == 0 || seen[podIP2+":8081"] == 0 || len(seen) != 2 {
			t.Errorf("endpoints answering: %v; want both", seen)
		}
		t.Logf("spread over 24 connections: %v", seen)
	})
	t.Run("affinity keeps a client on one endpoint", func(t *testing.T) {
		first, err := l.dial(t, "10.96.0.12:80")
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		for i := 0; i < 12; i++ {
			if got, err := l.dial(t, "10.96.0.12:80"); err != nil || got != first {
				t.Fatalf("connection %d answered by %q (%v), first by %q", i, got, err, first)
			}
		}
	})
	t.Run("node port on the node's address reaches the endpoint", func(t *testing.T) {
		got, err := l.dial(t, nodeIP+":30080")
		if err != nil || got != podIP2+":8081" {
			t.Fatalf("dial %s:30080 = %q, %v; want answered by %s:8081", nodeIP, got, err, podIP2)
		}
	})
	t.Run("service without endpoints refuses at once", func(t *testing.T) {
		start := time.Now()
		_, err := l.dial(t, "10.96.0.40:80")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial 10.96.0.40:80: %v; want connection refused", err)
		}
		t.Logf("refused after %v", time.Since(start))
	})
}
