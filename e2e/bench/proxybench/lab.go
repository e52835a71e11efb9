package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netns"
)

const (
	nsPrefix = "skiffbench-"
	nodeIP   = "10.244.0.1"
	podIP    = "10.244.0.2"
	echoPort = 8080
)

// lab is the two network namespaces the benchmark runs in.
type lab struct {
	nodeName, podName string
	node, pod         netns.NsHandle
	made              []string
	echoLn            net.Listener
	echoServed        atomic.Int64
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// removeStaleNamespaces deletes the namespaces of earlier runs whose
// process is gone (a crash or SIGKILL skips cleanup); a live run's are
// left alone.
func removeStaleNamespaces() {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, nsPrefix) {
			continue
		}
		pid, err := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:])
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			continue
		}
		if err := ipCmd("netns", "del", name); err != nil {
			logf("stale namespace %s: %v", name, err)
		} else {
			logf("removed stale namespace %s", name)
		}
	}
}

// newLab makes the node and pod namespaces; on error it removes what it
// made.
func newLab() (_ *lab, err error) {
	pid := os.Getpid()
	l := &lab{
		nodeName: fmt.Sprintf("%snode-%d", nsPrefix, pid),
		podName:  fmt.Sprintf("%spod-%d", nsPrefix, pid),
		node:     netns.None(), pod: netns.None(),
	}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	for _, n := range []string{l.nodeName, l.podName} {
		if err := ipCmd("netns", "add", n); err != nil {
			return nil, err
		}
		l.made = append(l.made, n)
	}
	nn, pn := l.nodeName, l.podName
	// Every command names its namespace (-n): the veth is even created
	// inside the node namespace, so nothing ever appears in the machine's.
	for _, args := range [][]string{
		{"-n", nn, "link", "set", "lo", "up"},
		{"-n", pn, "link", "set", "lo", "up"},
		{"-n", nn, "link", "add", "br0", "type", "bridge"},
		{"-n", nn, "addr", "add", nodeIP + "/24", "dev", "br0"},
		{"-n", nn, "link", "set", "br0", "up"},
		{"-n", nn, "link", "add", "vpod", "type", "veth", "peer", "name", "eth0", "netns", pn},
		{"-n", nn, "link", "set", "vpod", "master", "br0", "up"},
		{"-n", pn, "addr", "add", podIP + "/24", "dev", "eth0"},
		{"-n", pn, "link", "set", "eth0", "up"},
		{"-n", pn, "route", "add", "default", "via", nodeIP},
		{"-n", nn, "route", "add", "default", "dev", "br0"},
		{"netns", "exec", nn, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	} {
		if err := ipCmd(args...); err != nil {
			return nil, err
		}
	}
	if l.node, err = netns.GetFromName(nn); err != nil {
		return nil, fmt.Errorf("open %s: %w", nn, err)
	}
	if l.pod, err = netns.GetFromName(pn); err != nil {
		return nil, fmt.Errorf("open %s: %w", pn, err)
	}
	return l, nil
}

func (l *lab) nodePath() string { return "/run/netns/" + l.nodeName }

// close removes the namespaces (their links go with them).
func (l *lab) close() {
	if l.echoLn != nil {
		l.echoLn.Close()
	}
	for _, h := range []netns.NsHandle{l.node, l.pod} {
		if h.IsOpen() {
			h.Close()
		}
	}
	for _, n := range l.made {
		if err := ipCmd("netns", "del", n); err != nil {
			logf("cleanup: %v", err)
		}
	}
	l.made = nil
}

// inNS runs fn on a goroutine locked to a thread switched into ns. The
// thread is never unlocked: when the goroutine returns it exits with it,
// so no other goroutine can ever run in (or create sockets in) ns by
// accident, and the process's own namespace is never at risk.
func inNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		cur, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("setns check: %w", err)
			return
		}
		same := cur.Equal(ns)
		cur.Close()
		if !same {
			errc <- errors.New("setns check: thread is not in the namespace")
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// startEcho listens on podIP:8080 inside the pod namespace and echoes
// every byte until the client goes away.
func (l *lab) startEcho(ctx context.Context) error {
	err := inNS(l.pod, func() error {
		ln, err := net.Listen("tcp", net.JoinHostPort(podIP, strconv.Itoa(echoPort)))
		l.echoLn = ln
		return err
	})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.echoLn.Close()
	}()
	go func() {
		for {
			c, err := l.echoLn.Accept()
			if err != nil {
				return
			}
			l.echoServed.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return nil
}
