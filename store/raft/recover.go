package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	hraft "github.com/hashicorp/raft"

	"skiff/store/sqlite"
)

// ResetCluster (--cluster-reset) makes this member's data a one-member
// cluster: raft.RecoverCluster replaces the configuration by this member
// alone, commits every entry its log holds, and records the result as a
// snapshot with an empty log. Every write this member applied is kept (and
// any it had in its log but not yet applied). The member must not be
// running; start it with Open afterwards, and join the others afresh.
func ResetCluster(ctx context.Context, cfg Config) (err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return err
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = cfg.BindAddr
	}
	st, err := openStorage(cfg)
	if err != nil {
		return err
	}
	defer st.logs.Close()
	has, err := st.hasState()
	if err != nil {
		return err
	}
	if !has {
		return fmt.Errorf("raft: %s holds no raft state to reset", cfg.Dir)
	}
	replica, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(cfg.Dir, stateDBFile), Replica: true, Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("raft: open replica: %w", err)
	}
	defer func() { err = errors.Join(err, replica.Close()) }()
	restore, err := needRestore(replica, st)
	if err != nil {
		return err
	}
	f := &fsm{replica: replica, dir: cfg.Dir, log: cfg.Logger, ctx: ctx, applied: newNotifier(), skipRestore: !restore}
	_, trans := hraft.NewInmemTransport(hraft.ServerAddress(addr))
	defer trans.Close()
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(cfg.ID)
	rc.Logger = newHCLog(cfg.Logger, "raft")
	conf := hraft.Configuration{Servers: []hraft.Server{{Suffrage: hraft.Voter, ID: hraft.ServerID(cfg.ID), Address: hraft.ServerAddress(addr)}}}
	if err := hraft.RecoverCluster(rc, f, st.logs, st.logs, st.snaps, trans, conf); err != nil {
		return fmt.Errorf("raft: reset cluster: %w", err)
	}
	// The replica now holds every entry up to the new snapshot's index;
	// recording that spares the next start a restore of its own copy.
	list, err := st.snaps.List()
	if err != nil {
		return fmt.Errorf("raft: reset cluster: %w", err)
	}
	if len(list) > 0 && list[0].Index > replica.AppliedIndex() {
		if _, err := replica.Apply(ctx, sqlite.Batch{Index: list[0].Index}); err != nil {
			return fmt.Errorf("raft: reset cluster: %w", err)
		}
	}
	cfg.Logger.Info("raft: cluster reset to this member alone", "id", cfg.ID, "address", addr)
	return nil
}

// RestoreSnapshot (--cluster-reset-restore-path) wipes dir and makes file,
// a sqlite Backup (skiff snapshot save, Store.Backup), its state.db with the
// applied index reset, so that Open with Bootstrap forms a new one-member
// cluster holding that state (it becomes the cluster's first raft
// snapshot, which later members receive). The member must not be running.
func RestoreSnapshot(ctx context.Context, dir, file string) error {
	if dir == "" {
		return errors.New("raft: RestoreSnapshot needs a directory")
	}
	if _, err := sqlite.ReadMeta(ctx, file); err != nil { // a skiff database?
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("raft: restore snapshot: wipe %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	dst := filepath.Join(dir, stateDBFile)
	if err := copyFile(file, dst+".tmp"); err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	if err := sqlite.ResetAppliedIndex(ctx, dst+".tmp"); err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	return syncDir(dir)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
