package raft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"

	"skiff/store"
	"skiff/store/sqlite"
)

// A log entry's data: a format byte, then the JSON of the batch's
// commands. The byte leaves room for another encoding later.
const entryJSON byte = 1

type entry struct {
	Commands []sqlite.Command `json:"c"`
}

func encodeEntry(cmds []sqlite.Command) ([]byte, error) {
	b, err := json.Marshal(entry{Commands: cmds})
	if err != nil {
		return nil, err
	}
	return append([]byte{entryJSON}, b...), nil
}

func decodeEntry(data []byte) ([]sqlite.Command, error) {
	if len(data) == 0 || data[0] != entryJSON {
		return nil, errors.New("raft: log entry in an unknown format")
	}
	var e entry
	if err := json.Unmarshal(data[1:], &e); err != nil {
		return nil, fmt.Errorf("raft: decode log entry: %w", err)
	}
	return e.Commands, nil
}

// entryResult is what the FSM returns for a command entry: raft hands it to
// the leader's ApplyFuture.
type entryResult struct {
	results []sqlite.Result
	err     error
}

// fsm applies committed entries to the SQLite replica. It implements
// raft.BatchingFSM: the entries raft hands over together (up to
// MaxAppendEntries) are applied in one SQLite transaction, one fsync.
type fsm struct {
	replica *sqlite.Store
	dir     string // for snapshot temp files
	log     *slog.Logger
	ctx     context.Context

	// seen is the highest raft index handed to ApplyBatch and applied:
	// with the barriers' indexes it tells the leader that its replica has
	// caught up with a commit index (see readIndex).
	seen atomic.Uint64
	// broken is set when the replica failed to apply an entry: from then
	// on nothing is applied or snapshotted, so the replica never skips an
	// entry and no snapshot claims an index it does not hold. The member
	// needs a restart (it replays from its applied index).
	broken atomic.Bool
	// skipRestore makes Restore discard the stream: ResetCluster uses it
	// when the replica is already at or past the snapshot.
	skipRestore bool

	applied *notifier
}

var _ hraft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *hraft.Log) interface{} { return f.ApplyBatch([]*hraft.Log{l})[0] }

func (f *fsm) ApplyBatch(logs []*hraft.Log) []interface{} {
	resp := make([]interface{}, len(logs))
	if f.broken.Load() {
		for i := range resp {
			resp[i] = entryResult{err: errReplicaBroken}
		}
		return resp
	}
	// Entries the replica already holds are skipped one by one here, not
	// by Apply: the merged batch below carries only the last index.
	done := f.replica.AppliedIndex()
	type span struct{ i, from, to int }
	var cmds []sqlite.Command
	var spans []span
	var last uint64
	for i, l := range logs {
		if l.Index <= done {
			resp[i] = entryResult{err: errReplayed}
			continue
		}
		last = l.Index
		if l.Type != hraft.LogCommand {
			continue // a configuration: only its index is recorded
		}
		c, err := decodeEntry(l.Data)
		if err != nil {
			resp[i] = entryResult{err: err}
			continue
		}
		spans = append(spans, span{i, len(cmds), len(cmds) + len(c)})
		cmds = append(cmds, c...)
	}
	if last == 0 {
		return resp
	}
	results, err := f.replica.Apply(f.ctx, sqlite.Batch{Index: last, Commands: cmds})
	if err != nil {
		f.broken.Store(true)
		if !errors.Is(err, store.ErrClosed) {
			f.log.Error("raft: replica failed to apply committed entries; this member stops applying until restarted",
				"first", logs[0].Index, "last", last, "err", err)
		}
		for i := range resp {
			if resp[i] == nil {
				resp[i] = entryResult{err: fmt.Errorf("%w: %w", errReplicaBroken, err)}
			}
		}
		return resp
	}
	for _, sp := range spans {
		resp[sp.i] = entryResult{results: results[sp.from:sp.to]}
	}
	for i, l := range logs {
		if resp[i] == nil && l.Index > done {
			resp[i] = entryResult{}
		}
	}
	storeMax(&f.seen, logs[len(logs)-1].Index)
	f.applied.notify()
	return resp
}

var (
	errReplayed      = errors.New("raft: entry was already applied")
	errReplicaBroken = errors.New("raft: the local replica failed to apply the log; restart this member")
)

// Snapshot captures nothing: Persist copies the replica as it is then,
// which holds at least every entry up to the snapshot's index (Apply is not
// called between Snapshot and the start of Persist's copy), and maybe more,
// which the recorded applied index makes harmless on replay.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	if f.broken.Load() {
		return nil, errReplicaBroken
	}
	return &fsmSnapshot{f: f}, nil
}

type fsmSnapshot struct{ f *fsm }

func (s *fsmSnapshot) Persist(sink hraft.SnapshotSink) error {
	err := s.persist(sink)
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) persist(sink io.Writer) error {
	tmp, err := tempPath(s.f.dir, "snapshot-*.db")
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := s.f.replica.Backup(s.f.ctx, tmp); err != nil {
		return fmt.Errorf("raft: snapshot: %w", err)
	}
	src, err := os.Open(tmp)
	if err != nil {
		return fmt.Errorf("raft: snapshot: %w", err)
	}
	defer src.Close()
	if _, err := io.Copy(sink, src); err != nil {
		return fmt.Errorf("raft: snapshot: write: %w", err)
	}
	return nil
}

func (s *fsmSnapshot) Release() {}

// Restore replaces the replica by a snapshot: a follower too far behind the
// leader's log, or a start with a replica older than the newest snapshot.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if f.skipRestore {
		_, err := io.Copy(io.Discard, rc)
		return err
	}
	tmp, err := tempPath(f.dir, "restore-*.db")
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	out, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	if _, err := io.Copy(out, rc); err != nil {
		out.Close()
		return fmt.Errorf("raft: restore: read snapshot: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	if err := f.replica.Restore(f.ctx, tmp); err != nil {
		return fmt.Errorf("raft: restore: %w", err)
	}
	f.broken.Store(false)
	f.applied.notify()
	return nil
}

// tempPath names a file that does not exist yet in dir (Backup wants that).
func tempPath(dir, pattern string) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("raft: temp file: %w", err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return "", err
	}
	return filepath.Clean(name), nil
}

func storeMax(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// notifier wakes everyone waiting for the replica to advance.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}
