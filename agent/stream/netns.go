package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"

	"github.com/vishvananda/netns"
)

// dialPod connects to port on the pod's loopback: inside the network
// namespace at nsPath, or on the host's for "" (a host-network pod).
func dialPod(ctx context.Context, nsPath string, port uint16) (net.Conn, error) {
	if nsPath == "" {
		return dialLoopback(ctx, port)
	}
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		conn, err := inNetNS(nsPath, func() (net.Conn, error) { return dialLoopback(ctx, port) })
		ch <- result{conn, err}
	}()
	select {
	case r := <-ch:
		return r.conn, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// dialLoopback dials 127.0.0.1 and then ::1, as the kubelet does.
func dialLoopback(ctx context.Context, port uint16) (net.Conn, error) {
	var d net.Dialer
	p := strconv.Itoa(int(port))
	conn, err4 := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", p))
	if err4 == nil {
		return conn, nil
	}
	conn, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", p))
	if err6 == nil {
		return conn, nil
	}
	return nil, errors.Join(err4, err6)
}

// inNetNS runs fn on an OS thread switched into the network namespace at
// nsPath: sockets fn creates belong to that namespace for good. The thread
// is switched back afterwards; if that fails it stays locked, so Go
// retires it instead of reusing it in the wrong namespace.
func inNetNS[T any](nsPath string, fn func() (T, error)) (T, error) {
	var zero T
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return zero, fmt.Errorf("current network namespace: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(nsPath)
	if err != nil {
		runtime.UnlockOSThread()
		return zero, fmt.Errorf("pod network namespace %s: %w", nsPath, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return zero, fmt.Errorf("enter network namespace %s: %w", nsPath, err)
	}
	v, ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: it dies with this goroutine.
		return v, ferr
	}
	runtime.UnlockOSThread()
	return v, ferr
}
