package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"skiff/server"
	"skiff/server/snapshot"
	"skiff/store/raft"
	"skiff/store/sqlite"
)

// addSnapshotFlags are the server's scheduled-snapshot flags (k3s's
// --etcd-snapshot-*).
func addSnapshotFlags(f *pflag.FlagSet, cfg *server.SnapshotConfig) {
	f.StringVar(&cfg.Cron, "snapshot-schedule-cron", snapshot.DefaultCron, "when to snapshot the state store, in cron format (5 fields, or @daily, @every 6h)")
	f.IntVar(&cfg.Retention, "snapshot-retention", 5, "scheduled snapshots to keep (older ones are deleted)")
	f.BoolVar(&cfg.Disable, "disable-snapshots", false, "take no scheduled snapshots")
	f.StringVar(&cfg.Dir, "snapshot-dir", "", "directory of the snapshots (default <data-dir>/server/db/snapshots)")
}

// snapshotFlags are the flags every `skiff snapshot` subcommand shares.
type snapshotFlags struct {
	dataDir, dir, node string
}

func (o *snapshotFlags) snapshotDir() string {
	if o.dir != "" {
		return o.dir
	}
	return snapshot.Dir(o.dataDir)
}

func (o *snapshotFlags) nodeName() (string, error) {
	if o.node != "" {
		return o.node, nil
	}
	return os.Hostname()
}

// raftDir is store/raft's directory under a data directory.
func raftDir(dataDir string) string {
	return filepath.Join(dataDir, "server", "db", "raft")
}

// storeFile is the database a data directory's server keeps: the Raft
// member's replica when there is one, else the single server's.
func storeFile(dataDir string) (path string, isRaft bool, err error) {
	if p := filepath.Join(raftDir(dataDir), "state.db"); exists(p) {
		return p, true, nil
	}
	if p := server.StorePath(dataDir); exists(p) {
		return p, false, nil
	}
	return "", false, fmt.Errorf("no state store in %s (has a server run with --data-dir %s?)", filepath.Join(dataDir, "server", "db"), dataDir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// fileSource snapshots a database file from this process: the server may
// be running, WAL lets a second process read a consistent state.
type fileSource string

func (f fileSource) Backup(ctx context.Context, dst string) error {
	return sqlite.BackupFile(ctx, string(f), dst)
}

func newSnapshotCommand() *cobra.Command {
	o := &snapshotFlags{}
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, list, delete, prune and restore snapshots of the state store",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.dataDir, "data-dir", "/var/lib/skiff", "the server's data directory")
	pf.StringVar(&o.dir, "snapshot-dir", "", "directory of the snapshots (default <data-dir>/server/db/snapshots)")
	pf.StringVar(&o.node, "node-name", "", "node name snapshots carry (default: the hostname)")
	cmd.AddCommand(snapshotSaveCommand(o), snapshotListCommand(o), snapshotDeleteCommand(o),
		snapshotPruneCommand(o), snapshotRestoreCommand(o))
	return cmd
}

func snapshotSaveCommand(o *snapshotFlags) *cobra.Command {
	name := snapshot.OnDemandName
	cmd := &cobra.Command{
		Use:   "save",
		Short: "Save a snapshot now (the server may be running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			db, _, err := storeFile(o.dataDir)
			if err != nil {
				return err
			}
			node, err := o.nodeName()
			if err != nil {
				return err
			}
			info, err := snapshot.Save(cmd.Context(), fileSource(db), o.snapshotDir(), name, node, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Snapshot %s saved: revision %d, %d bytes, %s\n", info.Name, info.Revision, info.Size, info.Path)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "snapshot name prefix (the file is <name>-<node>-<unix time>)")
	return cmd
}

func snapshotListCommand(o *snapshotFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the snapshots",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			infos, err := snapshot.List(o.snapshotDir())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(w, "NAME\tSIZE\tCREATED\tREVISION")
			for _, s := range infos {
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\n", s.Name, s.Size, s.Created.Local().Format(time.RFC3339), s.Revision)
			}
			return w.Flush()
		},
	}
}

func snapshotDeleteCommand(o *snapshotFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME...",
		Aliases: []string{"rm"},
		Short:   "Delete snapshots by name",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := snapshot.Delete(o.snapshotDir(), args...); err != nil {
				return err
			}
			for _, n := range args {
				fmt.Fprintf(cmd.OutOrStdout(), "Snapshot %s deleted\n", n)
			}
			return nil
		},
	}
}

func snapshotPruneCommand(o *snapshotFlags) *cobra.Command {
	name, retention := snapshot.ScheduledName, 5
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete this node's snapshots of a name beyond the newest --snapshot-retention",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if retention < 1 {
				return fmt.Errorf("--snapshot-retention %d: want at least 1", retention)
			}
			node, err := o.nodeName()
			if err != nil {
				return err
			}
			return snapshot.Prune(o.snapshotDir(), name+"-"+node, retention)
		},
	}
	cmd.Flags().StringVar(&name, "name", name, "name prefix of the snapshots to prune (on-demand ones are named on-demand)")
	cmd.Flags().IntVar(&retention, "snapshot-retention", retention, "snapshots to keep")
	return cmd
}

func snapshotRestoreCommand(o *snapshotFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Make a snapshot the server's state (the server must be stopped)",
		Long: "Restore replaces the state store of --data-dir by the snapshot FILE (a path, or a name in the snapshot directory).\n" +
			"The server must be stopped. The old single-server database is kept as state.db.before-restore-<time>;\n" +
			"a Raft member becomes a one-member cluster holding the snapshot (other members must join it again).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return restoreSnapshot(cmd, o, args[0])
		},
	}
}

func restoreSnapshot(cmd *cobra.Command, o *snapshotFlags, arg string) error {
	ctx := cmd.Context()
	file := arg
	if !strings.ContainsRune(arg, os.PathSeparator) {
		if p := filepath.Join(o.snapshotDir(), arg); exists(p) {
			file = p
		}
	}
	meta, err := sqlite.ReadMeta(ctx, file)
	if err != nil {
		return fmt.Errorf("restore %s: %w", arg, err)
	}
	lock, err := snapshot.LockDataDir(o.dataDir)
	if err != nil {
		return fmt.Errorf("restore: stop the server first: %w", err)
	}
	defer lock.Close()
	out := cmd.OutOrStdout()
	if dir := raftDir(o.dataDir); exists(dir) {
		return restoreRaft(ctx, out, dir, file, meta.Revision)
	}
	db := server.StorePath(o.dataDir)
	aside, err := snapshot.RestoreSQLiteAt(ctx, file, db, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Restored %s (revision %d) into %s\n", file, meta.Revision, db)
	if aside != "" {
		fmt.Fprintf(out, "The previous database is kept as %s\n", aside)
	}
	return nil
}

// restoreRaft keeps the member's Raft state aside (raft.RestoreSnapshot
// wipes its directory) and makes file the state of a new one-member
// cluster.
func restoreRaft(ctx context.Context, out io.Writer, dir, file string, rev int64) error {
	aside := dir + ".before-restore-" + strconv.FormatInt(time.Now().Unix(), 10)
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(dir, abs); err == nil && !strings.HasPrefix(rel, "..") {
		file = filepath.Join(aside, rel) // a file of the old state: follow it aside
	}
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("restore: keep the old Raft state: %w", err)
	}
	if err := raft.RestoreSnapshot(ctx, dir, file); err != nil {
		return fmt.Errorf("restore %s: %w (the old Raft state is in %s)", file, err, aside)
	}
	fmt.Fprintf(out, "Restored %s (revision %d) into %s; the previous Raft state is kept as %s\n", file, rev, dir, aside)
	fmt.Fprintln(out, "Start the server with --cluster-init: it forms a one-member cluster holding the snapshot; other servers join it afresh")
	return nil
}
