package storetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashEnv, when set, makes the test binary the crash test's writer process
// writing into the directory it names.
const crashEnv = "SKIFF_STORETEST_CRASH_DIR"

// CrashChildMain makes the test binary the crash test's writer when the
// environment asks for it, and then never returns: call it first in the
// backend's TestMain. Otherwise it returns at once.
//
// The writer runs a storm of creates and updates from many goroutines and
// prints one line per acknowledged write ("key revision value") to stdout,
// only after the store has returned success, until it is killed.
func CrashChildMain(open OpenFunc) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		return
	}
	ctx := context.Background()
	s, err := open(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash writer: open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	ack := func(key string, rev int64, value string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, "%s %d %s\n", key, rev, value)
	}
	for w := 0; w < 32; w++ {
		go func() {
			var prevKey string
			var prevRev int64
			for i := 0; ; i++ {
				key := fmt.Sprintf("/crash/%02d/%08d", w, i)
				value := "c-" + strconv.Itoa(i)
				kv, err := s.Create(ctx, key, []byte(value))
				if err != nil {
					fmt.Fprintln(os.Stderr, "crash writer: create:", err)
					os.Exit(2)
				}
				ack(key, kv.ModRevision, value)
				if i%2 == 1 {
					value = "u-" + strconv.Itoa(i)
					u, err := s.Update(ctx, prevKey, []byte(value), prevRev)
					if err != nil {
						fmt.Fprintln(os.Stderr, "crash writer: update:", err)
						os.Exit(2)
					}
					ack(prevKey, u.ModRevision, value)
				}
				prevKey, prevRev = key, kv.ModRevision
			}
		}()
	}
	select {} // until SIGKILL
}

type ackedWrite struct {
	rev   int64
	value string
}

func testCrash(t *testing.T, open OpenFunc) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	const target = 4000
	last := map[string]ackedWrite{} // newest acknowledged write per key
	var maxRev int64
	count := 0
	enough := make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				readDone <- fmt.Errorf("bad ack line %q", sc.Text())
				return
			}
			rev, _ := strconv.ParseInt(f[1], 10, 64)
			if a, ok := last[f[0]]; !ok || rev > a.rev {
				last[f[0]] = ackedWrite{rev, f[2]}
			}
			maxRev = max(maxRev, rev)
			if count++; count == target {
				close(enough)
			}
		}
		readDone <- sc.Err()
	}()
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
	}
	// Kill mid-storm: writes are in flight, batches half-committed.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if count < 100 {
		t.Fatalf("writer acknowledged only %d writes before the kill; stderr:\n%s", count, stderr.String())
	}
	t.Logf("writer acknowledged %d writes to %d keys before SIGKILL", count, len(last))

	ctx := ctxT(t)
	s, err := open(ctx, dir)
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer s.Close()
	if rev := mustRev(t, s); rev < maxRev {
		t.Fatalf("revision after reopen %d is below the highest acknowledged %d", rev, maxRev)
	}
	lost := 0
	for key, a := range last {
		kv, err := s.Get(ctx, key)
		switch {
		case err != nil:
			t.Errorf("acknowledged write lost: %s @%d: %v", key, a.rev, err)
		case kv.ModRevision < a.rev:
			t.Errorf("acknowledged write lost: %s is at revision %d, %d was acknowledged", key, kv.ModRevision, a.rev)
		case kv.ModRevision == a.rev && string(kv.Value) != a.value:
			t.Errorf("%s @%d has value %q, %q was acknowledged", key, a.rev, kv.Value, a.value)
		default:
			continue
		}
		if lost++; lost > 10 {
			t.Fatal("too many lost writes")
		}
	}
	// The store keeps working where it left off.
	if kv := mustCreate(t, s, "/crash/after", "v"); kv.ModRevision != mustRev(t, s) {
		t.Fatalf("write after reopen got revision %d", kv.ModRevision)
	}
}
