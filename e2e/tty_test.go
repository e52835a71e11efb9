package e2e

import (
	"context"
	"io"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// ttySession is a kubectl run under a pseudo-terminal, as a person at a
// terminal runs `kubectl exec -it` or `kubectl debug -it`.
type ttySession struct {
	t      *testing.T
	master *os.File
	out    ptyOutput
	exited chan error
	read   chan struct{}
	// onTimeout, if set, adds context to a failed wait.
	onTimeout func() string
}

// startTTY starts kubectl bin with args on a new 24x80 pseudo-terminal;
// the session is killed and closed when the test ends.
func startTTY(t *testing.T, c *netCluster, within time.Duration, bin string, args ...string) *ttySession {
	t.Helper()
	master, slave, err := openPTY(24, 80)
	if err != nil {
		t.Fatalf("pseudo-terminal: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	cmd := c.kubectlCmd(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		slave.Close()
		master.Close()
		cancel()
		t.Fatal(err)
	}
	slave.Close()
	s := &ttySession{t: t, master: master, exited: make(chan error, 1), read: make(chan struct{})}
	go func() { s.exited <- cmd.Wait() }()
	go func() {
		defer close(s.read)
		io.Copy(&s.out, master) // ends with EIO once kubectl closed the slave
	}()
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		select {
		case err := <-s.exited:
			s.exited <- err
		case <-time.After(10 * time.Second):
			t.Errorf("kubectl %v: not gone 10s after SIGKILL", args)
		}
		master.Close()
		<-s.read
		cancel()
	})
	return s
}

// screen is everything the terminal has shown so far.
func (s *ttySession) screen() string { return s.out.String() }

// typeIn writes keystrokes to the terminal.
func (s *ttySession) typeIn(keys string) {
	s.t.Helper()
	if _, err := s.master.Write([]byte(keys)); err != nil {
		s.t.Fatalf("type: %v", err)
	}
}

// waitFor waits until the screen matches re, typing retype (if set) every
// interval meanwhile: a prompt or an answer may need asking again.
func (s *ttySession) waitFor(what string, re *regexp.Regexp, within time.Duration, retype string, interval time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	next := time.Now()
	for !re.MatchString(s.screen()) {
		if time.Now().After(deadline) {
			extra := ""
			if s.onTimeout != nil {
				extra = "\n" + s.onTimeout()
			}
			s.t.Fatalf("%s: not within %v; terminal shows %q%s", what, within, s.screen(), extra)
		}
		if retype != "" && time.Now().After(next) {
			s.typeIn(retype)
			next = time.Now().Add(interval)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wait returns kubectl's exit error once it exited (and its output has
// been read to the end), failing the test after within.
func (s *ttySession) wait(within time.Duration) error {
	s.t.Helper()
	var err error
	select {
	case err = <-s.exited:
		s.exited <- err // for the cleanup
	case <-time.After(within):
		s.t.Fatalf("kubectl: no exit within %v; terminal shows %q", within, s.screen())
	}
	select {
	case <-s.read:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("pseudo-terminal output does not end after kubectl exited")
	}
	return err
}
