package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"skiff/store"
)

// revProbeKey is the key read to learn a revision: a range request's
// header carries the store's current revision whatever the key, and a
// count-only read of one key costs etcd next to nothing.
const revProbeKey = "\x00"

func toKV(kv *mvccpb.KeyValue) store.KeyValue {
	return store.KeyValue{Key: string(kv.Key), Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidKey)
	}
	return nil
}

// Get returns the current value of key (a linearizable read).
func (s *Store) Get(ctx context.Context, key string) (store.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return store.KeyValue{}, err
	}
	defer done()
	resp, err := s.cli.Get(rctx, key)
	if err != nil {
		return store.KeyValue{}, s.mapErr(ctx, "get "+key, err)
	}
	if len(resp.Kvs) == 0 {
		return store.KeyValue{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	return toKV(resp.Kvs[0]), nil
}

// List reads a page of keys under opts.Prefix at one revision.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	start, rev := opts.Prefix, opts.Revision
	if opts.Continue != "" {
		var err error
		if rev, start, err = store.DecodeContinue(opts.Continue, opts.Prefix); err != nil {
			return store.ListResult{}, err
		}
	}
	if rev < 0 {
		return store.ListResult{}, fmt.Errorf("etcd: list at negative revision %d", rev)
	}
	// "" is no key: start at the smallest one. An end of "\x00" is etcd's
	// "every key from start on", right for the empty prefix and for a
	// prefix of 0xff bytes, which PrefixEnd has no end for.
	if start == "" {
		start = "\x00"
	}
	end := store.PrefixEnd(opts.Prefix)
	if end == "" {
		end = "\x00"
	}
	ropts := []clientv3.OpOption{clientv3.WithRange(end)}
	if rev > 0 {
		ropts = append(ropts, clientv3.WithRev(rev))
	}
	if opts.Limit > 0 {
		ropts = append(ropts, clientv3.WithLimit(opts.Limit))
	}
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return store.ListResult{}, err
	}
	defer done()
	resp, err := s.cli.Get(rctx, start, ropts...)
	if err != nil {
		return store.ListResult{}, s.mapErr(ctx, fmt.Sprintf("list %q at %d", opts.Prefix, rev), err)
	}
	if rev == 0 {
		// The header's revision is the current one, which a read at
		// revision 0 was served at (for an older revision it is not).
		rev = resp.Header.Revision
	}
	res := store.ListResult{Items: make([]store.KeyValue, len(resp.Kvs)), Revision: rev}
	for i, kv := range resp.Kvs {
		res.Items[i] = toKV(kv)
	}
	if resp.More && len(resp.Kvs) > 0 {
		// Count is every key in [start, end) at rev, the page included.
		res.RemainingCount = resp.Count - int64(len(resp.Kvs))
		res.Continue = store.EncodeContinue(rev, res.Items[len(res.Items)-1].Key+"\x00")
	}
	return res, nil
}

// Create stores a new key: one transaction that puts it if its
// CreateRevision is 0 (absent or deleted) and else reads it, so that
// ErrExists comes with the current value and takes no revision.
func (s *Store) Create(ctx context.Context, key string, value []byte) (store.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return store.KeyValue{}, err
	}
	defer done()
	resp, err := s.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return store.KeyValue{}, s.mapErr(ctx, "create "+key, err)
	}
	if !resp.Succeeded {
		cur := resp.Responses[0].GetResponseRange().Kvs
		if len(cur) == 0 { // cannot happen: the compare saw the key
			return store.KeyValue{}, fmt.Errorf("%w: %s", store.ErrExists, key)
		}
		return toKV(cur[0]), fmt.Errorf("%w: %s", store.ErrExists, key)
	}
	rev := resp.Header.Revision
	return store.KeyValue{Key: key, Value: value, CreateRevision: rev, ModRevision: rev}, nil
}

// guard is the compare of a conditional write: the key's ModRevision is
// expected, or with expected 0 the key exists (a missing key compares as
// revision 0).
func guard(key string, expected int64) clientv3.Cmp {
	if expected == 0 {
		return clientv3.Compare(clientv3.ModRevision(key), ">", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", expected)
}

// refused explains a conditional write whose compare failed, from the
// key's current state read in the same transaction.
func refused(key string, expected int64, cur []*mvccpb.KeyValue) (store.KeyValue, error) {
	if len(cur) == 0 {
		return store.KeyValue{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	kv := toKV(cur[0])
	return kv, fmt.Errorf("%w: %s is at revision %d, not %d", store.ErrConflict, key, kv.ModRevision, expected)
}

// Update replaces the value of key if its ModRevision is expectedRev (0:
// any, as long as it exists).
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRev int64) (store.KeyValue, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, err
	}
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return store.KeyValue{}, err
	}
	defer done()
	resp, err := s.cli.Txn(rctx).
		If(guard(key, expectedRev)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return store.KeyValue{}, s.mapErr(ctx, "update "+key, err)
	}
	if !resp.Succeeded {
		return refused(key, expectedRev, resp.Responses[0].GetResponseRange().Kvs)
	}
	rev := resp.Header.Revision
	kv := store.KeyValue{Key: key, Value: value, CreateRevision: rev, ModRevision: rev}
	if prev := resp.Responses[0].GetResponsePut().PrevKv; prev != nil {
		kv.CreateRevision = prev.CreateRevision
	}
	return kv, nil
}

// Delete removes key if its ModRevision is expectedRev (0: any, as long as
// it exists) and returns the value it had and the delete's revision.
func (s *Store) Delete(ctx context.Context, key string, expectedRev int64) (store.KeyValue, int64, error) {
	if err := checkKey(key); err != nil {
		return store.KeyValue{}, 0, err
	}
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return store.KeyValue{}, 0, err
	}
	defer done()
	resp, err := s.cli.Txn(rctx).
		If(guard(key, expectedRev)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return store.KeyValue{}, 0, s.mapErr(ctx, "delete "+key, err)
	}
	if !resp.Succeeded {
		kv, err := refused(key, expectedRev, resp.Responses[0].GetResponseRange().Kvs)
		return kv, 0, err
	}
	prev := resp.Responses[0].GetResponseDeleteRange().PrevKvs
	if len(prev) == 0 { // cannot happen: the compare saw the key
		return store.KeyValue{}, 0, fmt.Errorf("etcd: delete %s: no previous value returned", key)
	}
	return toKV(prev[0]), resp.Header.Revision, nil
}

// CurrentRevision is the header revision of a linearizable read: etcd
// confirms with a quorum (ReadIndex) that its member is up to date before
// answering, so the revision covers every write acknowledged before the
// call.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	resp, err := s.cli.Get(rctx, revProbeKey, clientv3.WithCountOnly())
	if err != nil {
		return 0, s.mapErr(ctx, "current revision", err)
	}
	return resp.Header.Revision, nil
}

// Compact discards history at and below rev (etcd's compaction; the space
// is reclaimed by etcd in the background). Compacting at or below the
// compacted revision is a no-op; above the current one ErrFutureRevision.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.cli.Compact(rctx, rev); err != nil {
		err = s.mapErr(ctx, fmt.Sprintf("compact to %d", rev), err)
		if errors.Is(err, store.ErrCompacted) {
			return nil
		}
		return err
	}
	s.noteCompacted(rev)
	return nil
}

// noteCompacted records that etcd is compacted at least to rev.
func (s *Store) noteCompacted(rev int64) {
	for {
		cur := s.compacted.Load()
		if rev <= cur || s.compacted.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// CompactedRevision is etcd's compacted revision. etcd has no request that
// returns it, and this package keeps no key for it (see the package
// comment), but a read at revision r fails with ErrCompacted exactly when
// r is below it. So it is the smallest revision still readable, found by
// bisection between the highest compaction this store has seen (its own,
// or one a watch was told of) and the current revision: one linearizable
// read when no other server compacted since, about log2(current) reads
// otherwise. A compaction at revision 1 cannot be told from none and is
// reported as 0.
func (s *Store) CompactedRevision(ctx context.Context) (int64, error) {
	known := s.compacted.Load()
	lo := max(known, 1)
	ok, err := s.readableAt(ctx, lo)
	if err != nil || ok {
		return known, err
	}
	// Invariant: lo is not readable (compacted > lo), hi is.
	var hi int64
	for {
		if hi, err = s.CurrentRevision(ctx); err != nil {
			return 0, err
		}
		// Compaction may overtake the current revision just read (others
		// write and compact meanwhile): read it again then.
		if ok, err = s.readableAt(ctx, hi); err != nil {
			return 0, err
		} else if ok {
			break
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := s.readableAt(ctx, mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	s.noteCompacted(hi)
	return s.compacted.Load(), nil
}

// readableAt says whether a linearizable read at rev succeeds (rev is at
// or above the compacted revision).
func (s *Store) readableAt(ctx context.Context, rev int64) (bool, error) {
	rctx, done, err := s.reqCtx(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	_, err = s.cli.Get(rctx, revProbeKey, clientv3.WithCountOnly(), clientv3.WithRev(rev))
	switch err = s.mapErr(ctx, fmt.Sprintf("read at %d", rev), err); {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrCompacted):
		return false, nil
	}
	return false, err
}
