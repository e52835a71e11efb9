// Package nsthread runs a function on an OS thread switched into another
// network namespace. Sockets and links made there stay in that namespace
// for good, so only their creation needs the switch.
package nsthread

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn on a fresh goroutine whose OS thread is switched into ns,
// and switches it back afterwards. If switching back fails the thread
// stays locked, so the Go runtime retires it when the goroutine ends
// instead of reusing a thread in the wrong namespace.
func Do(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(fnErr, fmt.Errorf("restore network namespace: %w", err))
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}

// DoPath is Do for the namespace bind-mounted at path (such as
// /run/netns/<name>); "" runs fn in the current namespace.
func DoPath(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	h, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer h.Close()
	return Do(h, fn)
}
