package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked: another process (a running server, a restore) holds the data
// directory's lock.
var ErrLocked = errors.New("data directory in use")

// LockPath is the lock file of a data directory's state store.
func LockPath(dataDir string) string {
	return filepath.Join(dataDir, "server", "db", "lock")
}

// Lock is an exclusive flock on LockPath. The server holds it while it
// runs and `skiff snapshot restore` while it replaces the database, so
// neither runs under the other, nor two servers on one data directory.
// The kernel drops it when the process dies, so a crash leaves no stale
// lock behind.
type Lock struct{ f *os.File }

// LockDataDir takes the lock without waiting; a lock held elsewhere fails
// with ErrLocked, naming the holder's pid.
func LockDataDir(dataDir string) (*Lock, error) {
	path := LockPath(dataDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
				holder = "process " + strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("%w: %s holds %s (is a skiff server running on %s?)", ErrLocked, holder, path, dataDir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The holder's pid, for the message above; informative only.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Close releases the lock.
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	// The pid is cleared first: a reader must not name a process that no
	// longer holds it.
	l.f.Truncate(0)
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}
