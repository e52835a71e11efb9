package sqlite

import (
	"context"
	"database/sql"
)

// The log: one row per revision. A key's rows form a chain through prev_rev
// (0 for the first row of a key, otherwise the rev of the key's previous row,
// which may be a tombstone when the key is re-created). Because a chain only
// grows, prev_rev rises with rev along it, so the unique index on
// (key, prev_rev) serves three purposes at once:
//   - it makes compare-and-swap safe: two rows can never claim the same
//     predecessor, whatever writes race;
//   - its last entry for a key is the key's current row (newest revision);
//   - "row r is the newest at revision R" is "no row with key = r.key,
//     prev_rev = r.rev and rev <= R exists": one index probe. Every index
//     entry also carries rev (the rowid), so the revision filter needs no
//     table lookup.
//
// meta holds the current and compacted revisions. The current revision lives
// here rather than being max(rev) because compaction may delete the newest
// row when it is a tombstone, and revisions must never go backwards. A fresh
// store is at revision 1, as etcd is, so that revision 0 never names a real
// snapshot and can mean "now" in Watch and List.
const schema = `
CREATE TABLE IF NOT EXISTS kv (
	rev      INTEGER PRIMARY KEY,
	key      TEXT    NOT NULL,
	created  INTEGER NOT NULL,
	prev_rev INTEGER NOT NULL,
	deleted  INTEGER NOT NULL CHECK (deleted IN (0, 1)),
	value    BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS kv_key_prev ON kv (key, prev_rev);
CREATE TABLE IF NOT EXISTS meta (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	current_rev INTEGER NOT NULL,
	compact_rev INTEGER NOT NULL,
	applied_index INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO meta (id, current_rev, compact_rev) VALUES (1, 1, 0);
`

const (
	sqlLatest  = `SELECT rev, created, deleted, value FROM kv WHERE key = ? ORDER BY prev_rev DESC LIMIT 1`
	sqlInsert  = `INSERT INTO kv (rev, key, created, prev_rev, deleted, value) VALUES (?, ?, ?, ?, ?, ?)`
	sqlMeta    = `SELECT current_rev, compact_rev FROM meta WHERE id = 1`
	sqlMetaAll = `SELECT current_rev, compact_rev, applied_index FROM meta WHERE id = 1`
	// applied_index is the Raft index of the last batch applied (0 for a
	// store with its own committer); added after the first release, so
	// migrate adds it to older databases.
	sqlSetApplied = `UPDATE meta SET applied_index = ? WHERE id = 1`
	sqlSetRev     = `UPDATE meta SET current_rev = ? WHERE id = 1`

	// A row is live at revision R when it is not a tombstone, its rev <= R and
	// no successor with rev <= R exists. Listing walks kv_key_prev in key order
	// and stops at the limit, so a page costs its own size, not the prefix's.
	sqlListLive = `SELECT kv.rev, kv.key, kv.created, kv.value FROM kv
WHERE kv.key >= ?1 %s AND kv.rev <= ?2 AND kv.deleted = 0
  AND NOT EXISTS (SELECT 1 FROM kv n WHERE n.key = kv.key AND n.prev_rev = kv.rev AND n.rev <= ?2)
ORDER BY kv.key LIMIT ?4`
	sqlCountLive = `SELECT count(*) FROM kv
WHERE kv.key >= ?1 %s AND kv.rev <= ?2 AND kv.deleted = 0
  AND NOT EXISTS (SELECT 1 FROM kv n WHERE n.key = kv.key AND n.prev_rev = kv.rev AND n.rev <= ?2)`
	sqlKeyUpper = `AND kv.key < ?3`

	// History for a watch replay, with each row's predecessor (gone when it
	// was a compacted tombstone, which makes the row a creation).
	sqlHistory = `SELECT kv.rev, kv.key, kv.created, kv.deleted, kv.value, p.rev, p.created, p.deleted, p.value
FROM kv LEFT JOIN kv p ON p.rev = kv.prev_rev
WHERE kv.rev > ?1 AND kv.rev <= ?2 AND kv.key >= ?3 %s
ORDER BY kv.rev LIMIT ?5`
	sqlHistoryUpper = `AND kv.key < ?4`

	// Compaction from revision lo to hi: every row in (lo, hi] supersedes its
	// predecessor, which goes; then tombstones in (lo, hi] go. Rows at or below
	// lo were already reduced to the newest per key by earlier compactions, so
	// the window is all that needs looking at. Predecessors first: the
	// tombstones' own predecessors are found through them.
	sqlCompactPrev       = `DELETE FROM kv WHERE rev IN (SELECT prev_rev FROM kv WHERE rev > ?1 AND rev <= ?2 AND prev_rev <> 0)`
	sqlCompactTombstones = `DELETE FROM kv WHERE rev > ?1 AND rev <= ?2 AND deleted = 1`
	sqlSetCompact        = `UPDATE meta SET compact_rev = ? WHERE id = 1`
)

// migrate creates the schema, and adds the columns later releases added to a
// database an earlier one made.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return err
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('meta') WHERE name = 'applied_index'`).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		_, err := db.ExecContext(ctx, `ALTER TABLE meta ADD COLUMN applied_index INTEGER NOT NULL DEFAULT 0`)
		return err
	}
	return nil
}
