package e2e

// The streaming subresources through the real kubectl, oldest (1.27: SPDY)
// and newest (1.33: WebSocket v5, port-forward over the WebSocket tunnel)
// installed: kubectl in the server's namespace, the pod on an agent node,
// so every byte goes kubectl → API server → agent across the lab network.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// streamNode is the agent the streaming pods run on.
const streamNode = "agent-1"

// streamPods are the pods of TestAgentStream, all pinned to streamNode:
// counter prints "line N" every 0.2 s (and serves exec and cp); crasher
// prints a marker and exits 1 on its first run, then prints "second-run"
// and sleeps (an emptyDir remembers the first run); web is busybox httpd
// on 8080 and, on 7000, a server answering the sha256 of what it read
// until EOF; oneshot prints a 40000-byte line, then waits for /tmp/go to
// print "bye" and exit 0.
const streamPods = `apiVersion: v1
kind: Pod
metadata: {name: counter, labels: {app: stream}}
spec:
  nodeSelector: {kubernetes.io/hostname: ` + streamNode + `}
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, 'i=0; while true; do echo "line $i"; i=$((i+1)); sleep 0.2; done']
---
apiVersion: v1
kind: Pod
metadata: {name: crasher, labels: {app: stream}}
spec:
  nodeSelector: {kubernetes.io/hostname: ` + streamNode + `}
  terminationGracePeriodSeconds: 1
  restartPolicy: Always
  volumes: [{name: data, emptyDir: {}}]
  containers:
  - name: c
    image: busybox
    imagePullPolicy: Never
    volumeMounts: [{name: data, mountPath: /data}]
    command: [sh, -c, 'if [ -e /data/ran ]; then echo second-run; exec sleep 3600; fi; touch /data/ran; echo first-run; echo marker-before-exit; exit 1']
---
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: stream}}
spec:
  nodeSelector: {kubernetes.io/hostname: ` + streamNode + `}
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    imagePullPolicy: Never
    command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && { nc -ll -p 7000 -e sha256sum & } && exec httpd -f -p 8080 -h /www']
    ports: [{containerPort: 8080, name: http}, {containerPort: 7000, name: sum}]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: oneshot, labels: {app: stream}}
spec:
  nodeSelector: {kubernetes.io/hostname: ` + streamNode + `}
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    imagePullPolicy: Never
    command:
    - sh
    - -c
    - |
      head -c 40000 /dev/zero | tr '\000' x; echo
      echo waiting
      while [ ! -e /tmp/go ]; do sleep 0.2; done
      echo bye
`

func TestAgentStream_LogsFollowTimestampsSincePrevious_ExecTTYAndStdin_PortForward_Cp_WithOldestAndNewestKubectl(t *testing.T) {
	kubectls := kubectlVersions(t)
	c := newNetCluster(t, netClusterSpec{Agents: 1})
	c.waitNodesReady(2, 2*time.Minute)
	c.kubectlIn(streamPods, "apply", "-f", "-")
	for _, p := range c.waitPodsReady("app=stream", 4, 3*time.Minute) {
		if p.Spec.NodeName != streamNode {
			t.Fatalf("pod %s on %q, want %s", p.Name, p.Spec.NodeName, streamNode)
		}
	}

	t.Run("logs -f --tail=2 streams new lines as they are written", func(t *testing.T) {
		last := counterLine(t, c.kubectlOK("logs", "counter", "--tail=1"))
		k := startKubectl(t, c, "kubectl", "logs", "-f", "--tail=2", "counter")
		var got []int
		for len(got) < 2 || got[len(got)-1] <= last+3 {
			line, ok := k.line(30 * time.Second)
			if !ok {
				t.Fatalf("logs -f: after lines %v, no more within 30s (stderr %q)", got, k.stderr())
			}
			got = append(got, counterLine(t, line))
		}
		// The tail is the two lines that were last when the call began (or
		// later ones), then every line in order as the container writes it.
		if got[0] < last-1 {
			t.Fatalf("logs -f --tail=2 began at line %d; the last line before was %d", got[0], last)
		}
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("logs -f lines %v: not consecutive", got)
			}
		}
		if !k.running() {
			t.Fatalf("logs -f exited while the container runs: %v %q", k.exitErr(), k.stderr())
		}
	})

	t.Run("logs --timestamps, --since-time and --since select lines by their time", func(t *testing.T) {
		// Wait until the log spans 4 s, so that a cut inside it exists.
		var full []tsLine
		deadline := time.Now().Add(30 * time.Second)
		for {
			full = parseTSLines(t, c.kubectlOK("logs", "counter", "--timestamps"))
			if len(full) > 2 && full[len(full)-1].ts.Sub(full[0].ts) > 4*time.Second {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("counter log does not span 4s after 30s: %d lines", len(full))
			}
			time.Sleep(time.Second)
		}
		for i := 1; i < len(full); i++ {
			if full[i].ts.Before(full[i-1].ts) || counterLine(t, full[i].text) != counterLine(t, full[i-1].text)+1 {
				t.Fatalf("timestamped lines out of order: %q then %q", full[i-1].raw, full[i].raw)
			}
		}

		// --since-time: the lines of the full log from that second on,
		// then newer ones. The API carries seconds: cut on a second.
		cut := full[0].ts.Truncate(time.Second).Add(2 * time.Second)
		idx := 0
		for idx < len(full) && full[idx].ts.Before(cut) {
			idx++
		}
		if idx == len(full) {
			t.Fatalf("no line after %v in %d lines", cut, len(full))
		}
		since := parseTSLines(t, c.kubectlOK("logs", "counter", "--timestamps", "--since-time="+cut.UTC().Format(time.RFC3339)))
		want := full[idx:]
		if len(since) < len(want) {
			t.Fatalf("--since-time=%s: %d lines, want at least the %d of the full log from then on", cut.Format(time.RFC3339), len(since), len(want))
		}
		for i, l := range want {
			if since[i].raw != l.raw {
				t.Fatalf("--since-time=%s line %d: %q, want %q", cut.Format(time.RFC3339), i, since[i].raw, l.raw)
			}
		}

		// --since=2s: nothing older than 2 s before the call; something
		// (the counter writes 5 lines a second).
		t0 := time.Now()
		recent := parseTSLines(t, c.kubectlOK("logs", "counter", "--timestamps", "--since=2s"))
		if len(recent) == 0 {
			t.Fatalf("--since=2s: no line")
		}
		for _, l := range recent {
			if l.ts.Before(t0.Add(-2 * time.Second)) {
				t.Fatalf("--since=2s at %v returned %q", t0.Format(time.RFC3339Nano), l.raw)
			}
		}
	})

	t.Run("logs -f ends when the container exits; long lines come whole", func(t *testing.T) {
		k := startKubectl(t, c, "kubectl", "logs", "-f", "oneshot")
		for _, want := range []string{strings.Repeat("x", 40000), "waiting"} {
			line, ok := k.line(30 * time.Second)
			if !ok || line != want {
				t.Fatalf("logs -f oneshot: %d bytes %.40q (%v), want %d bytes %.40q; stderr %q", len(line), line, ok, len(want), want, k.stderr())
			}
		}
		c.kubectlOK("exec", "oneshot", "--", "touch", "/tmp/go")
		if line, ok := k.line(30 * time.Second); !ok || line != "bye" {
			t.Fatalf("logs -f oneshot: %q (%v), want bye; stderr %q", line, ok, k.stderr())
		}
		select {
		case <-k.done:
			if k.err != nil {
				t.Fatalf("logs -f of an exited container: %v %q", k.err, k.stderr())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("logs -f still running 30s after the container printed its last line")
		}
		if out := c.kubectlOK("logs", "oneshot", "--tail=2"); out != "waiting\nbye\n" {
			t.Fatalf("logs --tail=2 of the exited container: %q", out)
		}
	})

	t.Run("logs --previous shows the terminated instance after a restart", func(t *testing.T) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var pod corev1.Pod
			if err := json.Unmarshal([]byte(c.kubectlOK("get", "pod", "crasher", "-o", "json")), &pod); err != nil {
				t.Fatal(err)
			}
			if cs := pod.Status.ContainerStatuses; len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].State.Running != nil {
				if cs[0].RestartCount != 1 {
					t.Fatalf("crasher restarted %d times, want once: %+v", cs[0].RestartCount, cs[0])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("crasher not restarted and running after 2m: %+v\n%s", pod.Status, c.kubectlNoFail("describe", "pod", "crasher"))
			}
			time.Sleep(time.Second)
		}
		prev := c.kubectlOK("logs", "crasher", "--previous")
		if prev != "first-run\nmarker-before-exit\n" {
			t.Fatalf("logs --previous: %q, want the first run's output", prev)
		}
		var cur string
		netWaitFor(t, 10*time.Second, "second run's log line", func() bool {
			cur = c.kubectlOK("logs", "crasher")
			return cur != ""
		})
		if cur != "second-run\n" {
			t.Fatalf("logs: %q, want the current run's output only", cur)
		}
		if out, err := c.kubectl("logs", "counter", "--previous"); err == nil {
			t.Fatalf("logs --previous of a container that never restarted: %q, want an error", out)
		}
	})

	for _, v := range []string{"1.27", "1.33"} {
		bin := kubectls[v]
		t.Run("kubectl "+v+" exec -it sh in a pseudo-terminal: output, tty, resize, exit code", func(t *testing.T) {
			execTTY(t, c, bin)
		})
		t.Run("kubectl "+v+" exec -i pipes stdin, splits stdout from stderr, propagates the exit code", func(t *testing.T) {
			data := randomText(300 << 10)
			out, errOut, err := c.kubectlBinIn(bin, data, "exec", "-i", "counter", "--", "cat")
			if err != nil {
				t.Fatalf("exec -i cat: %v %q", err, errOut)
			}
			if out != data {
				t.Fatalf("exec -i cat: %d bytes back (sha %s), sent %d (sha %s)", len(out), sha(out), len(data), sha(data))
			}
			out, errOut, err = c.kubectlBinIn(bin, "", "exec", "counter", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Fatalf("exec exit 7: err %v, stderr %q", err, errOut)
			}
			if out != "out\n" || !strings.HasPrefix(errOut, "err\n") {
				t.Fatalf("exec: stdout %q, stderr %q; want out and err apart", out, errOut)
			}
			var want strings.Builder
			for i := 1; i <= 200000; i++ {
				fmt.Fprintf(&want, "%d\n", i)
			}
			out, errOut, err = c.kubectlBinIn(bin, "", "exec", "counter", "--", "seq", "1", "200000")
			if err != nil || out != want.String() {
				t.Fatalf("exec seq 1 200000: %d bytes (sha %s), want %d (sha %s); %v %q", len(out), sha(out), want.Len(), sha(want.String()), err, errOut)
			}
			out, errOut, err = c.kubectlBinIn(bin, "some input\n", "exec", "-i", "counter", "--", "sh", "-c", "wc -c; exit 5")
			if !errors.As(err, &ee) || ee.ExitCode() != 5 || strings.TrimSpace(out) != "11" {
				t.Fatalf("exec -i wc -c; exit 5: %q, err %v, stderr %q; want 11 and exit code 5", out, err, errOut)
			}
			// A command that exits without reading its input: the exit code
			// must not be lost in a connection reset by the unread input
			// (a race: several rounds).
			big := randomText(4 << 20)
			for i := range 6 {
				script, want := "exit 4", ""
				if i%2 == 1 {
					script, want = "echo early; exit 4", "early\n"
				}
				out, errOut, err = c.kubectlBinIn(bin, big, "exec", "-i", "counter", "--", "sh", "-c", script)
				if !errors.As(err, &ee) || ee.ExitCode() != 4 || out != want {
					t.Fatalf("round %d: exec -i sh -c %q ignoring 4 MiB of stdin: %q, err %v, stderr %q; want %q and exit code 4", i, script, out, err, errOut, want)
				}
			}
			if out, errOut, err := c.kubectlBinIn(bin, "", "exec", "counter", "--", "no-such-command"); err == nil {
				t.Fatalf("exec of a missing command succeeded: %q %q", out, errOut)
			}
		})
		t.Run("kubectl "+v+" port-forward carries HTTP to the pod", func(t *testing.T) {
			portForward(t, c, bin)
		})
		t.Run("kubectl "+v+" cp copies a file and a directory into the pod and back", func(t *testing.T) {
			copyRoundTrip(t, c, bin)
		})
	}
}

// counterLine is N of "line N".
func counterLine(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "line "))
	if err != nil || !strings.HasPrefix(strings.TrimSpace(s), "line ") {
		t.Fatalf("not a counter line: %q", s)
	}
	return n
}

// tsLine is a line of `kubectl logs --timestamps`.
type tsLine struct {
	raw, text string
	ts        time.Time
}

func parseTSLines(t *testing.T, out string) []tsLine {
	t.Helper()
	var lines []tsLine
	for _, raw := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if raw == "" {
			continue
		}
		ts, text, ok := strings.Cut(raw, " ")
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil {
			t.Fatalf("not a timestamped line: %q (%v)", raw, err)
		}
		lines = append(lines, tsLine{raw: raw, text: text, ts: tm})
	}
	return lines
}

// bgKubectl is a kubectl running in the background, in its own process
// group, killed at cleanup; its stdout comes line by line.
type bgKubectl struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	err   error

	mu     sync.Mutex
	errOut bytes.Buffer
}

func (k *bgKubectl) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.errOut.Write(p)
}

func (k *bgKubectl) stderr() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.errOut.String()
}

// startKubectl starts kubectl bin args in the server's namespace.
func startKubectl(t *testing.T, c *netCluster, bin string, args ...string) *bgKubectl {
	t.Helper()
	k := &bgKubectl{cmd: c.kubectlCmd(context.Background(), bin, args...), lines: make(chan string, 1024), done: make(chan struct{})}
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	k.cmd.Stderr = k
	stdout, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case k.lines <- sc.Text():
			default: // nobody reads that far: drop
			}
		}
	}()
	go func() {
		<-readDone
		k.err = k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-k.done:
		case <-time.After(10 * time.Second):
			t.Errorf("kubectl %v: not gone 10s after SIGKILL", args)
		}
	})
	return k
}

// line is the next line of stdout, waiting at most d.
func (k *bgKubectl) line(d time.Duration) (string, bool) {
	select {
	case l := <-k.lines:
		return l, true
	case <-time.After(d):
		return "", false
	}
}

func (k *bgKubectl) running() bool { return !netIsDone(k.done) }

func (k *bgKubectl) exitErr() error {
	if k.running() {
		return nil
	}
	return k.err
}

// ptyOutput collects what a pseudo-terminal's master reads.
type ptyOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *ptyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// openPTY opens a new pseudo-terminal: its master and its (unlocked)
// slave, sized rows × cols.
func openPTY(rows, cols uint16) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("ptsname: %w", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	if err := setPTYSize(master, rows, cols); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// setPTYSize sets the terminal's size (the foreground process gets
// SIGWINCH when it changes).
func setPTYSize(f *os.File, rows, cols uint16) error {
	return unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
}

// execTTY drives `kubectl exec -it counter -- sh` as a user at a terminal:
// kubectl runs on a pseudo-terminal's slave as its controlling terminal.
func execTTY(t *testing.T, c *netCluster, bin string) {
	s := startTTY(t, c, 90*time.Second, bin, "exec", "-it", "counter", "--", "sh")
	waitOut := func(what string, re *regexp.Regexp, within time.Duration, retype string) {
		t.Helper()
		s.waitFor(what, re, within, retype, time.Second)
	}
	waitOut("shell prompt", regexp.MustCompile(`/ # `), 30*time.Second, "")
	// The terminal's size reaches the container's terminal, and so does a
	// change of it (SIGWINCH → resize stream).
	waitOut("initial size 24x80", regexp.MustCompile(`(?m)^24 80\r?$`), 15*time.Second, "stty size\r")
	if err := setPTYSize(s.master, 33, 111); err != nil {
		t.Fatal(err)
	}
	waitOut("resized 33x111", regexp.MustCompile(`(?m)^33 111\r?$`), 15*time.Second, "stty size\r")
	// ^C interrupts the command in the container, not kubectl.
	s.typeIn("sleep 1000\r")
	waitOut("sleep typed", regexp.MustCompile(`sleep 1000`), 15*time.Second, "")
	waitOut("prompt after ^C", regexp.MustCompile(`sleep 1000(?s:.*)/ # `), 15*time.Second, "\x03")
	s.typeIn("echo $((6*7)); tty; exit 3\r")
	werr := s.wait(30 * time.Second)
	screen := s.screen()
	if !regexp.MustCompile(`(?m)^42\r?$`).MatchString(screen) {
		t.Fatalf("no 42 on the terminal: %q", screen)
	}
	if !regexp.MustCompile(`(?m)^/dev/pts/\d+\r?$`).MatchString(screen) {
		t.Fatalf("tty in the container is no pseudo-terminal: %q", screen)
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("kubectl exec -it exited with %v, want exit code 3; terminal shows %q", werr, screen)
	}
}

var forwardingRE = regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)`)

// portForward runs `kubectl port-forward pod/web :8080 :7000` and goes
// through it from the server's namespace: HTTP one by one, several at
// once, a 1 MiB file whose checksum the pod computed; and 7000, whose
// server answers only once it read EOF (the client's half-close must
// cross kubectl, the API server and the agent to the pod).
func portForward(t *testing.T, c *netCluster, bin string) {
	k := startKubectl(t, c, bin, "port-forward", "pod/web", ":8080", ":7000")
	ports := map[string]string{} // remote → local
	for len(ports) < 2 {
		line, ok := k.line(30 * time.Second)
		if !ok {
			t.Fatalf("port-forward: no 'Forwarding from 127.0.0.1' for both ports within 30s (%v); exited %v, stderr %q", ports, k.exitErr(), k.stderr())
		}
		if m := forwardingRE.FindStringSubmatch(line); m != nil {
			ports[m[2]] = m[1]
		}
	}
	port := ports["8080"]
	if port == "" || ports["7000"] == "" {
		t.Fatalf("port-forward: forwarded %v, want 8080 and 7000", ports)
	}
	base := "http://127.0.0.1:" + port
	for i := range 3 {
		body, code, err := getIn(c.server.NS, base+"/", 15*time.Second)
		if err != nil || code != 200 || strings.TrimSpace(body) != "web" {
			t.Fatalf("GET %d through port-forward: %d %q %v; kubectl stderr %q", i, code, body, err, k.stderr())
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, code, err := getIn(c.server.NS, base+"/", 15*time.Second)
			if err != nil || code != 200 || strings.TrimSpace(body) != "web" {
				errs <- fmt.Errorf("concurrent GET %d: %d %q %v", i, code, body, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v; kubectl stderr %q", err, k.stderr())
	}
	sum := strings.Fields(c.kubectlOK("exec", "web", "--", "sh", "-c",
		"[ -e /www/big ] || dd if=/dev/urandom of=/www/big bs=1024 count=1024 2>/dev/null; sha256sum /www/big"))
	if len(sum) == 0 {
		t.Fatal("no checksum of /www/big")
	}
	body, code, err := getIn(c.server.NS, base+"/big", 60*time.Second)
	if err != nil || code != 200 || len(body) != 1<<20 || sha(body) != sum[0] {
		t.Fatalf("GET /big through port-forward: %d, %d bytes, sha %s, %v; want 1 MiB with sha %s", code, len(body), sha(body), err, sum[0])
	}
	for i := range 2 {
		payload := randomText(3<<20 + i)
		got, err := sendAndHalfClose(c.server.NS, "127.0.0.1:"+ports["7000"], payload, 60*time.Second)
		if want := sha(payload) + "  -\n"; err != nil || got != want {
			t.Fatalf("sha256 server through port-forward, round %d: %q %v, want %q; kubectl stderr %q", i, got, err, want, k.stderr())
		}
	}
	if !k.running() {
		t.Fatalf("port-forward exited: %v %q", k.exitErr(), k.stderr())
	}
}

// sendAndHalfClose connects from namespace ns to addr, sends payload,
// closes its sending side and reads the answer until the peer closes.
func sendAndHalfClose(ns, addr, payload string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := dialIn(ctx, ns, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	werr := make(chan error, 1)
	go func() {
		_, err := io.WriteString(conn, payload)
		if err == nil {
			err = conn.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		return string(got), err
	}
	return string(got), <-werr
}

// copyRoundTrip copies a file and a directory into the counter pod with
// `kubectl cp` and back, comparing the bytes.
func copyRoundTrip(t *testing.T, c *netCluster, bin string) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	data := make([]byte, 512<<10+17)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	srcDir := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(srcDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"a.txt": "alpha\n", "sub/b.txt": randomText(70 << 10)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(srcDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remote := "/tmp/cp-" + strings.ReplaceAll(filepath.Base(bin), ".", "-")
	mustCp := func(from, to string) {
		t.Helper()
		if out, errOut, err := c.kubectlBinIn(bin, "", "cp", from, to); err != nil {
			t.Fatalf("kubectl cp %s %s: %v %q %q", from, to, err, out, errOut)
		}
	}
	mustCp(src, "default/counter:"+remote+".bin")
	if got := strings.Fields(c.kubectlOK("exec", "counter", "--", "sha256sum", remote+".bin")); len(got) == 0 || got[0] != sha(string(data)) {
		t.Fatalf("sha256 in the pod %v, want %s", got, sha(string(data)))
	}
	back := filepath.Join(dir, "back.bin")
	mustCp("default/counter:"+remote+".bin", back)
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copied back %d bytes (%v), want the %d sent", len(got), err, len(data))
	}
	mustCp(srcDir, "default/counter:"+remote+"-tree")
	backDir := filepath.Join(dir, "tree-back")
	mustCp("default/counter:"+remote+"-tree", backDir)
	for name, content := range files {
		got, err := os.ReadFile(filepath.Join(backDir, name))
		if err != nil || string(got) != content {
			t.Fatalf("directory copied back: %s has %d bytes (%v), want %d", name, len(got), err, len(content))
		}
	}
}

// randomText is n bytes of printable lines.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	b := make([]byte, n)
	for i := range b {
		if i%64 == 63 {
			b[i] = '\n'
			continue
		}
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
