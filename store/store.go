// Package store defines the contract between the API server and the cluster
// state store: a key-value log with one global, strictly increasing revision,
// compare-and-swap writes, snapshot reads and ordered watches. Backends live in
// subpackages (store/sqlite, later store/raft) and all pass store/storetest.
//
// The semantics follow what Kubernetes gets from etcd, because the API server's
// resourceVersion, optimistic concurrency and watch guarantees are built on them:
//   - every successful write gets the next revision; failed writes get none;
//   - a key's ModRevision is the revision of its last write, CreateRevision the
//     revision that created its current incarnation;
//   - a watch from revision R delivers every event with revision > R, in order,
//     exactly once, each carrying the previous value of the key.
package store

import (
	"context"
	"errors"
)

// Sentinel errors. Backends wrap them with %w; callers match with errors.Is.
var (
	// ErrNotFound: the key does not exist (or is deleted) at the revision read.
	ErrNotFound = errors.New("store: key not found")
	// ErrExists: Create found the key already present.
	ErrExists = errors.New("store: key already exists")
	// ErrConflict: the expected modification revision did not match the key's.
	ErrConflict = errors.New("store: revision conflict")
	// ErrCompacted: the requested revision is older than the compacted revision.
	ErrCompacted = errors.New("store: revision has been compacted")
	// ErrFutureRevision: the requested revision is newer than the current one.
	ErrFutureRevision = errors.New("store: revision is in the future")
	// ErrInvalidContinue: a continue token was malformed or for another prefix.
	ErrInvalidContinue = errors.New("store: invalid continue token")
	// ErrInvalidKey: an empty key, or one the backend cannot store.
	ErrInvalidKey = errors.New("store: invalid key")
	// ErrWatcherTooSlow: the watcher fell behind and was cut off so that it
	// could not hold up writers; re-watch from the last revision received.
	ErrWatcherTooSlow = errors.New("store: watcher fell behind and was closed")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrUnavailable: the store cannot serve the request now — a replicated
	// store without a quorum or a leader, an unreachable external datastore.
	// The write was not acknowledged (it may still be applied later, as
	// with a timeout); the API answers 503 with Retry-After.
	ErrUnavailable = errors.New("store: unavailable")
)

// KeyValue is one key at one revision.
type KeyValue struct {
	Key   string
	Value []byte
	// CreateRevision is the revision that created this incarnation of the key.
	CreateRevision int64
	// ModRevision is the revision of the key's last write; it is the object's
	// resourceVersion and the value to pass to Update and Delete.
	ModRevision int64
}

// EventType says what a watch event did to its key.
type EventType int

const (
	// Created: the key did not exist (or was deleted) before this revision.
	Created EventType = iota + 1
	// Updated: the key existed and got a new value.
	Updated
	// Deleted: the key was removed; Prev holds the value it had.
	Deleted
)

func (t EventType) String() string {
	switch t {
	case Created:
		return "CREATED"
	case Updated:
		return "UPDATED"
	case Deleted:
		return "DELETED"
	}
	return "UNKNOWN"
}

// Event is one write seen by a watch.
type Event struct {
	Type EventType
	// KV is the key after the write. For Deleted, Value is nil and ModRevision
	// is the revision of the delete.
	KV KeyValue
	// Prev is the key before the write; nil for Created.
	Prev *KeyValue
}

// Revision is the revision at which the event happened.
func (e Event) Revision() int64 { return e.KV.ModRevision }

// ListOptions selects a page of keys under a prefix.
type ListOptions struct {
	// Prefix selects keys that start with it; "" selects every key.
	Prefix string
	// Limit caps the page size; 0 means no limit.
	Limit int64
	// Continue resumes a previous List from its Continue token. The page is
	// read at the token's revision, so paging is one consistent snapshot.
	Continue string
	// Revision reads the snapshot at that revision; 0 reads the current one.
	// Ignored when Continue is set.
	Revision int64
}

// ListResult is a page of a List.
type ListResult struct {
	Items []KeyValue
	// Revision is the snapshot revision the page was read at.
	Revision int64
	// Continue is set when more keys follow; pass it in ListOptions.Continue.
	Continue string
	// RemainingCount is how many keys follow this page in the snapshot.
	RemainingCount int64
}

// Watcher is a running watch.
type Watcher interface {
	// Events delivers events in revision order. It is closed when the watch
	// ends: after Stop, when its context ends, or on an error (see Err).
	Events() <-chan Event
	// Err says why Events was closed: nil after Stop or context end,
	// ErrWatcherTooSlow, ErrClosed, or a backend error. Valid once Events is
	// closed.
	Err() error
	// Stop ends the watch and releases its resources; safe to call twice.
	Stop()
}

// Store is the contract every backend meets.
type Store interface {
	// Get returns the current value of key, or ErrNotFound.
	Get(ctx context.Context, key string) (KeyValue, error)
	// List returns keys under a prefix in key order at one snapshot revision.
	// A revision older than the compacted one fails with ErrCompacted; one
	// newer than the current revision with ErrFutureRevision.
	List(ctx context.Context, opts ListOptions) (ListResult, error)
	// Create stores a new key and returns it; ErrExists if it exists.
	Create(ctx context.Context, key string, value []byte) (KeyValue, error)
	// Update replaces the value of key if its ModRevision equals expectedRev
	// (0 accepts any). It returns the new KeyValue; ErrNotFound if the key is
	// absent, ErrConflict if the revision did not match. On ErrConflict the
	// returned KeyValue is the key's current state, so callers can retry.
	Update(ctx context.Context, key string, value []byte, expectedRev int64) (KeyValue, error)
	// Delete removes key if its ModRevision equals expectedRev (0 accepts any)
	// and returns the value it had plus the revision of the delete.
	// ErrNotFound and ErrConflict as for Update.
	Delete(ctx context.Context, key string, expectedRev int64) (prev KeyValue, rev int64, err error)
	// Watch streams every event under prefix with revision > afterRev, in
	// order. afterRev 0 starts at the current revision (only new events);
	// afterRev older than the compacted revision fails with ErrCompacted.
	// The watch ends when ctx ends or Stop is called.
	// Prefix "" watches every key. Each revision is exactly one event and
	// nothing else (failed writes, Compact) moves the revision, so such a
	// watch has consecutive revisions up to CurrentRevision: the API
	// server's watch cache relies on it to know it has caught up.
	Watch(ctx context.Context, prefix string, afterRev int64) (Watcher, error)
	// Compact discards history at and below rev, keeping the newest value of
	// every live key. Reads and watches below rev then fail with ErrCompacted.
	Compact(ctx context.Context, rev int64) error
	// CurrentRevision is the revision of the last successful write; a fresh
	// store is at revision 1, so 0 is never a real snapshot.
	CurrentRevision(ctx context.Context) (int64, error)
	// CompactedRevision is the revision of the last compaction (0 if none).
	CompactedRevision(ctx context.Context) (int64, error)
	// Close stops the store; blocked calls return ErrClosed.
	Close() error
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, or "" when there is none (the prefix is empty or all 0xff bytes).
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
