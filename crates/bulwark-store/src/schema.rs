//! Connection setup and schema migrations.
//!
//! The schema version lives in `PRAGMA user_version` rather than in a table so
//! that reading it costs nothing and cannot disagree with a half-applied
//! migration: each migration and its version bump commit in one transaction.

use crate::{StoreError, sqlite};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::time::Duration;

/// How long a writer waits for another connection's lock before giving up.
/// Several processes (CLI, server, per-session workers) share one database
/// file; five seconds absorbs a checkpoint or a long write without surfacing
/// `SQLITE_BUSY` to the agent loop.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Migrations in order; migration `i` moves the schema from version `i` to
/// `i + 1`. Never edit a released entry: append a new one. A migration that
/// needs to compute something (hashes) names a Rust step in [`backfill`],
/// which runs in the same transaction right after the SQL.
const MIGRATIONS: &[&str] = &[
    // v1: sessions, messages, audit.
    r#"
    CREATE TABLE sessions (
        id          TEXT    NOT NULL PRIMARY KEY,
        agent       TEXT    NOT NULL,
        user        TEXT    NOT NULL,
        created_ms  INTEGER NOT NULL,
        updated_ms  INTEGER NOT NULL,
        state_json  TEXT
    ) STRICT;
    CREATE INDEX sessions_by_created ON sessions (created_ms DESC);
    CREATE INDEX sessions_by_agent ON sessions (agent, created_ms DESC);

    CREATE TABLE messages (
        id           INTEGER NOT NULL PRIMARY KEY,
        session_id   TEXT    NOT NULL REFERENCES sessions (id),
        role         TEXT    NOT NULL,
        content_json TEXT    NOT NULL,
        created_ms   INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX messages_by_session ON messages (session_id, id);

    -- A transcript is evidence: rewriting history after the fact would let a
    -- compromised component hide what the model was shown. Deletion stays
    -- possible so a future retention policy can drop whole sessions.
    CREATE TRIGGER messages_no_update BEFORE UPDATE ON messages
    BEGIN
        SELECT RAISE(ABORT, 'messages are append-only');
    END;
    -- `INSERT OR REPLACE` deletes the conflicting row without firing DELETE
    -- triggers (recursive_triggers is off by default and is per connection),
    -- so a replace is refused at insert time instead.
    CREATE TRIGGER messages_no_replace BEFORE INSERT ON messages
    WHEN EXISTS (SELECT 1 FROM messages WHERE id = NEW.id)
    BEGIN
        SELECT RAISE(ABORT, 'messages are append-only');
    END;

    -- `seq` is the rowid. Rows can never be deleted (trigger below), so
    -- SQLite's max(rowid)+1 allocation yields dense sequence numbers starting
    -- at 1 without the extra write AUTOINCREMENT costs.
    CREATE TABLE audit (
        seq         INTEGER NOT NULL PRIMARY KEY,
        time_ms     INTEGER NOT NULL,
        session     TEXT    NOT NULL,
        agent       TEXT    NOT NULL,
        user        TEXT    NOT NULL,
        action      TEXT    NOT NULL,
        tool        TEXT    NOT NULL,
        operation   TEXT    NOT NULL,
        args_digest TEXT    NOT NULL,
        decision    TEXT    NOT NULL
            CHECK (decision IN ('allowed', 'denied', 'approved', 'failed', 'warned')),
        reason      TEXT    NOT NULL,
        detail      TEXT    NOT NULL,
        duration_us INTEGER NOT NULL CHECK (duration_us >= 0)
    ) STRICT;
    -- Deliberately no (session, seq) index: it added a page write to every
    -- commit (~5 us median, more WAL to checkpoint) on the door's hot path,
    -- while per-session queries are rare, interactive, and still walk the
    -- table in seq order stopping at LIMIT. Add one in a later migration if
    -- per-session reads become hot.

    -- Append-only at the SQL level, so a bug or a stray `bulwark` subcommand
    -- cannot rewrite the record. This is not tamper evidence against someone
    -- with the file (they can drop the trigger); the Merkle log is for that.
    CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    BEGIN
        SELECT RAISE(ABORT, 'audit log is append-only');
    END;
    CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
    BEGIN
        SELECT RAISE(ABORT, 'audit log is append-only');
    END;
    -- See messages_no_replace. For our own inserts NEW.seq is not yet
    -- assigned (SQLite reports -1), so this costs one primary-key probe.
    CREATE TRIGGER audit_no_replace BEFORE INSERT ON audit
    WHEN EXISTS (SELECT 1 FROM audit WHERE seq = NEW.seq)
    BEGIN
        SELECT RAISE(ABORT, 'audit log is append-only');
    END;
    "#,
    // v2: the Merkle log. `leaf` is the RFC 6962 leaf hash of the record's
    // canonical encoding as entry `seq` (`AuditRecord::leaf_hash(seq)`); the
    // writer computes it, and existing rows are backfilled by `backfill`.
    // Since the leaf commits to `seq`, the writer now assigns `seq` itself
    // (previous max + 1, inside its write transaction) instead of leaving
    // it to rowid allocation.
    r#"
    ALTER TABLE audit ADD COLUMN leaf BLOB;

    -- Signed tree heads. Append-only like the audit table: a checkpoint that
    -- left the machine must stay reproducible.
    CREATE TABLE audit_checkpoint (
        size    INTEGER NOT NULL PRIMARY KEY CHECK (size >= 0),
        root    BLOB    NOT NULL CHECK (length(root) = 32),
        note    TEXT    NOT NULL,
        time_ms INTEGER NOT NULL
    ) STRICT;
    CREATE TRIGGER audit_checkpoint_no_update BEFORE UPDATE ON audit_checkpoint
    BEGIN
        SELECT RAISE(ABORT, 'audit checkpoints are append-only');
    END;
    CREATE TRIGGER audit_checkpoint_no_delete BEFORE DELETE ON audit_checkpoint
    BEGIN
        SELECT RAISE(ABORT, 'audit checkpoints are append-only');
    END;
    CREATE TRIGGER audit_checkpoint_no_replace BEFORE INSERT ON audit_checkpoint
    WHEN EXISTS (SELECT 1 FROM audit_checkpoint WHERE size = NEW.size)
    BEGIN
        SELECT RAISE(ABORT, 'audit checkpoints are append-only');
    END;
    "#,
    // v3: each checkpoint keeps the frontier of its tree (the roots of the
    // perfect subtrees its `size` leaves split into, largest first, 32 bytes
    // each, one per set bit of `size`), so that the next checkpoint hashes
    // only the rows appended after it. Checkpoints stored before keep NULL:
    // the upgrade does not re-read the log, and the first incremental
    // checkpoint after it falls back to a full verification.
    r#"
    ALTER TABLE audit_checkpoint ADD COLUMN frontier BLOB
        CHECK (frontier IS NULL OR (length(frontier) % 32 = 0 AND length(frontier) <= 2048));
    "#,
    // v4: the server lists one user's sessions on every page load; without
    // this index that meant scanning everyone's sessions.
    // Each model call's tokens, so a user's budget can be summed over a
    // window (`tokens_since`).
    r#"
    CREATE INDEX sessions_by_user ON sessions (user, agent, created_ms DESC);

    CREATE TABLE token_usage (
        id       INTEGER NOT NULL PRIMARY KEY,
        session  TEXT    NOT NULL REFERENCES sessions (id),
        user     TEXT    NOT NULL,
        time_ms  INTEGER NOT NULL,
        tokens   INTEGER NOT NULL CHECK (tokens >= 0)
    ) STRICT;
    CREATE INDEX token_usage_by_user ON token_usage (user, time_ms);
    "#,
    // v5: the credits ledger (see `ledger`). Integer minor units only.
    // Balances are kept in the same transaction as the journal row that
    // moves them; the journal and the audit of every movement commit
    // together. `balance` is what the account can spend; `held` is what open
    // holds have reserved out of it.
    r#"
    CREATE TABLE ledger_accounts (
        id              TEXT    NOT NULL PRIMARY KEY,
        kind            TEXT    NOT NULL CHECK (kind IN ('user', 'agent', 'system')),
        balance         INTEGER NOT NULL CHECK (balance >= 0),
        held            INTEGER NOT NULL CHECK (held >= 0),
        max_num         INTEGER NOT NULL CHECK (max_num >= 0),
        max_den         INTEGER NOT NULL CHECK (max_den > 0 AND max_num <= max_den),
        reserve_floor   INTEGER NOT NULL CHECK (reserve_floor >= 0),
        daily_cap       INTEGER CHECK (daily_cap IS NULL OR daily_cap >= 0),
        counterparties  TEXT    NOT NULL,
        created_ms      INTEGER NOT NULL
    ) STRICT;
    -- Settled holds pay this account (`ledger::USAGE`).
    INSERT INTO ledger_accounts (id, kind, balance, held, max_num, max_den, reserve_floor,
        daily_cap, counterparties, created_ms)
        VALUES ('system:usage', 'system', 0, 0, 1, 2, 0, NULL, '[]', 0);
    CREATE TRIGGER ledger_accounts_no_delete BEFORE DELETE ON ledger_accounts
    BEGIN
        SELECT RAISE(ABORT, 'ledger accounts cannot be deleted');
    END;

    -- One row per movement, append-only. `request` is the canonical form of
    -- the request that made it, so a repeated idempotency key can be told
    -- apart from a different request reusing the key. `balance_before` is
    -- the debited account's spendable balance at the serialization point.
    CREATE TABLE ledger_journal (
        id              INTEGER NOT NULL PRIMARY KEY,
        time_ms         INTEGER NOT NULL,
        idempotency_key TEXT    NOT NULL UNIQUE,
        kind            TEXT    NOT NULL
            CHECK (kind IN ('mint', 'transfer', 'hold', 'settle', 'release')),
        from_account    TEXT    NOT NULL,
        to_account      TEXT    NOT NULL REFERENCES ledger_accounts (id),
        amount          INTEGER NOT NULL CHECK (amount > 0 OR kind IN ('settle', 'release')),
        released        INTEGER NOT NULL CHECK (released >= 0),
        balance_before  INTEGER NOT NULL CHECK (balance_before >= 0),
        hold_id         INTEGER,
        memo            TEXT    NOT NULL,
        request         TEXT    NOT NULL
    ) STRICT;
    CREATE INDEX ledger_journal_by_from ON ledger_journal (from_account, time_ms);
    CREATE INDEX ledger_journal_by_to ON ledger_journal (to_account, time_ms);
    CREATE TRIGGER ledger_journal_no_update BEFORE UPDATE ON ledger_journal
    BEGIN
        SELECT RAISE(ABORT, 'ledger journal is append-only');
    END;
    CREATE TRIGGER ledger_journal_no_delete BEFORE DELETE ON ledger_journal
    BEGIN
        SELECT RAISE(ABORT, 'ledger journal is append-only');
    END;
    CREATE TRIGGER ledger_journal_no_replace BEFORE INSERT ON ledger_journal
    WHEN EXISTS (SELECT 1 FROM ledger_journal WHERE id = NEW.id)
    BEGIN
        SELECT RAISE(ABORT, 'ledger journal is append-only');
    END;

    -- What each account paid out (transfers and settled charges) per UTC
    -- day (`time_ms / 86400000`), kept with the journal row that adds to
    -- it, so a daily cap costs one lookup instead of summing the day's rows.
    CREATE TABLE ledger_daily (
        account TEXT    NOT NULL,
        day     INTEGER NOT NULL,
        spent   INTEGER NOT NULL CHECK (spent >= 0),
        PRIMARY KEY (account, day)
    ) STRICT, WITHOUT ROWID;

    -- A hold goes open -> settled | released, once. It keeps who asked
    -- (for the audit records of its settlement) and which budget periods it
    -- counted against (so what it gives back is taken off the same ones).
    CREATE TABLE ledger_holds (
        id              INTEGER NOT NULL PRIMARY KEY,
        account         TEXT    NOT NULL REFERENCES ledger_accounts (id),
        amount          INTEGER NOT NULL CHECK (amount > 0),
        state           TEXT    NOT NULL CHECK (state IN ('open', 'settled', 'released')),
        created_ms      INTEGER NOT NULL,
        actor           TEXT    NOT NULL,
        budget_user     TEXT,
        budget_periods  TEXT    NOT NULL
    ) STRICT;
    CREATE TRIGGER ledger_holds_once BEFORE UPDATE ON ledger_holds
    WHEN OLD.state <> 'open' OR NEW.id <> OLD.id OR NEW.account <> OLD.account
        OR NEW.amount <> OLD.amount OR NEW.actor <> OLD.actor
        OR NEW.budget_user IS NOT OLD.budget_user OR NEW.budget_periods <> OLD.budget_periods
    BEGIN
        SELECT RAISE(ABORT, 'a closed hold cannot change');
    END;
    CREATE TRIGGER ledger_holds_no_delete BEFORE DELETE ON ledger_holds
    BEGIN
        SELECT RAISE(ABORT, 'ledger holds cannot be deleted');
    END;

    -- Credits a user's holds reserved and charged per period
    -- (`s:<session>`, `d:<UTC day number>`, `m:<YYYY-MM>`), for the
    -- access.toml budgets; kept in the hold's transaction.
    CREATE TABLE ledger_budget_use (
        user    TEXT    NOT NULL,
        period  TEXT    NOT NULL,
        used    INTEGER NOT NULL CHECK (used >= 0),
        PRIMARY KEY (user, period)
    ) STRICT, WITHOUT ROWID;

    -- Child agents spawned by a session, with their own ledger account.
    CREATE TABLE child_agents (
        id              TEXT    NOT NULL PRIMARY KEY,
        parent_session  TEXT    NOT NULL,
        parent_account  TEXT    NOT NULL REFERENCES ledger_accounts (id),
        user            TEXT    NOT NULL,
        agent           TEXT    NOT NULL,
        account         TEXT    NOT NULL UNIQUE REFERENCES ledger_accounts (id),
        state           TEXT    NOT NULL CHECK (state IN ('running', 'stopped', 'exhausted')),
        created_ms      INTEGER NOT NULL,
        updated_ms      INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX child_agents_by_parent ON child_agents (parent_session, created_ms);
    -- A stopped child stays stopped: its account was recalled.
    CREATE TRIGGER child_agents_stopped_is_final BEFORE UPDATE ON child_agents
    WHEN OLD.state = 'stopped' AND NEW.state <> 'stopped'
    BEGIN
        SELECT RAISE(ABORT, 'a stopped child agent cannot be restarted');
    END;
    "#,
    // Witness cosignatures of this log's checkpoints (c2sp.org/tlog-
    // cosignature): one row per witness and checkpoint size, kept only for
    // a checkpoint this log stored (the writer checks size and root).
    // `witness` is the witness's vkey, so a re-keyed witness is another one.
    // Append-only, like the checkpoints they cosign.
    r#"
    CREATE TABLE audit_cosignature (
        size      INTEGER NOT NULL CHECK (size >= 0),
        witness   TEXT    NOT NULL,
        root      BLOB    NOT NULL CHECK (length(root) = 32),
        line      TEXT    NOT NULL,
        timestamp INTEGER NOT NULL CHECK (timestamp >= 0),
        time_ms   INTEGER NOT NULL,
        PRIMARY KEY (witness, size)
    ) STRICT;
    CREATE INDEX audit_cosignature_by_size ON audit_cosignature (size);
    CREATE TRIGGER audit_cosignature_no_update BEFORE UPDATE ON audit_cosignature
    BEGIN
        SELECT RAISE(ABORT, 'audit cosignatures are append-only');
    END;
    CREATE TRIGGER audit_cosignature_no_delete BEFORE DELETE ON audit_cosignature
    BEGIN
        SELECT RAISE(ABORT, 'audit cosignatures are append-only');
    END;
    "#,
    // v7: session leases (see `lease.rs`): the one process allowed to run a
    // session. No foreign key: a new session is leased before it is stored.
    r#"
    CREATE TABLE session_leases (
        session      TEXT    NOT NULL PRIMARY KEY,
        holder       TEXT    NOT NULL,
        pid          INTEGER NOT NULL CHECK (pid >= 0),
        acquired_ms  INTEGER NOT NULL,
        renewed_ms   INTEGER NOT NULL,
        expires_ms   INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID;
    "#,
    // v8: the label table (see `provenance.rs`): the taint labels of
    // content Bulwark wrote, by root (names, never a path of this machine),
    // path and SHA-256 of the bytes. `labels` is the sorted, space-separated
    // label names ('' is "written by Bulwark, clean", which differs from no
    // row); the CHECK keeps anything but lowercase words out whoever writes.
    // `seq` orders the digests of one (root, path) by their last write, for
    // pruning; `untrusted` says the row is kept in preference to clean ones.
    // `source` and `time_ms` are the first labelling's tool call and time.
    r#"
    CREATE TABLE provenance (
        root      TEXT    NOT NULL CHECK (length(root) BETWEEN 1 AND 256),
        path      TEXT    NOT NULL CHECK (length(path) BETWEEN 1 AND 4096),
        digest    BLOB    NOT NULL CHECK (length(digest) = 32),
        labels    TEXT    NOT NULL
            CHECK (length(labels) <= 1024 AND labels NOT GLOB '*[^a-z0-9_ ]*'),
        untrusted INTEGER NOT NULL CHECK (untrusted IN (0, 1)),
        source    TEXT    NOT NULL CHECK (length(source) <= 256),
        time_ms   INTEGER NOT NULL,
        seq       INTEGER NOT NULL CHECK (seq >= 1),
        PRIMARY KEY (root, path, digest)
    ) STRICT, WITHOUT ROWID;
    "#,
];

/// Rust steps of migrations, by the version they migrate to.
fn backfill(tx: &Transaction<'_>, version: usize) -> Result<(), StoreError> {
    match version {
        2 => backfill_leaves(tx),
        _ => Ok(()),
    }
}

/// Rows hashed per round trip of the leaf backfill; bounds its memory.
const BACKFILL_CHUNK: usize = 4096;

/// Computes `leaf` for every audit row that has none. The update trigger is
/// dropped and recreated inside the migration transaction, so no other
/// connection ever sees the table without it. A row whose stored values no
/// longer decode keeps a NULL leaf, which `verify` reports.
fn backfill_leaves(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch("DROP TRIGGER audit_no_update")
        .map_err(sqlite("lifting audit update trigger for backfill"))?;
    let mut from = i64::MIN;
    let mut chunk = crate::scan::Chunk::default();
    loop {
        crate::scan::read_chunk(tx, from, BACKFILL_CHUNK, &mut chunk)?;
        chunk.hash();
        let Some(last) = chunk.rows.last() else { break };
        let done = last.seq == i64::MAX;
        from = last.seq.saturating_add(1);
        let mut update = tx
            .prepare_cached("UPDATE audit SET leaf = ?2 WHERE seq = ?1")
            .map_err(sqlite("preparing leaf backfill"))?;
        // A row whose values do not encode keeps its NULL leaf; one with a
        // negative seq can be entry of no log and keeps it too.
        for row in &chunk.rows {
            if row.encoded.is_err() || row.seq < 0 {
                continue;
            }
            update
                .execute(rusqlite::params![row.seq, row.leaf])
                .map_err(sqlite("backfilling leaf hash"))?;
        }
        if done {
            break;
        }
    }
    tx.execute_batch(
        "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
         BEGIN
             SELECT RAISE(ABORT, 'audit log is append-only');
         END;",
    )
    .map_err(sqlite("restoring audit update trigger"))
}

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Switches the file to WAL, retrying while another connection holds a lock.
///
/// The switch needs an exclusive lock, and when several processes open a new
/// file at once SQLite answers `SQLITE_BUSY` at once instead of calling the
/// busy handler (waiting could deadlock), so `busy_timeout` does not cover
/// it. The mode is persistent: once any opener has switched, the others see
/// `wal` on their next try.
fn enable_wal(conn: &Connection) -> Result<String, StoreError> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) => return Ok(mode),
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(sqlite("enabling WAL")(e)),
        }
    }
}

/// Applies the per-connection settings. These are not persisted in the file
/// (except `journal_mode`), so every connection must set them.
pub(crate) fn configure(conn: &Connection, file_backed: bool) -> Result<(), StoreError> {
    // First, so that every later statement (including the WAL switch, which
    // needs an exclusive lock) waits for concurrent openers instead of failing.
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(sqlite("setting busy_timeout"))?;
    if file_backed {
        let mode = enable_wal(conn)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Corrupt(format!(
                "database refused WAL journal mode (got {mode:?})"
            )));
        }
    }
    // NORMAL in WAL mode: a commit survives a process crash; only an OS crash
    // or power loss can lose the last transactions, never corrupt the file.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite("setting synchronous"))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(sqlite("enabling foreign_keys"))?;
    Ok(())
}

/// Brings the schema up to [`SCHEMA_VERSION`]. Safe to race with another
/// process doing the same: the version is re-read inside an IMMEDIATE
/// transaction, so only one of them applies each migration.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    migrate_to(conn, MIGRATIONS.len())
}

/// [`migrate`], stopping at schema version `target` (tests build databases
/// of earlier versions with it).
fn migrate_to(conn: &mut Connection, target: usize) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite("starting migration"))?;
    let current: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sqlite("reading schema version"))?;
    let current = usize::try_from(current)
        .map_err(|_| StoreError::Corrupt(format!("negative schema version {current}")))?;
    if current > MIGRATIONS.len() {
        // Refuse rather than guess: an older binary writing into a newer
        // schema could violate invariants it does not know about.
        return Err(StoreError::Corrupt(format!(
            "schema version {current} is newer than this build supports ({SCHEMA_VERSION})"
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().take(target).skip(current) {
        tx.execute_batch(sql)
            .map_err(sqlite(format!("applying migration {}", index + 1)))?;
        backfill(&tx, index + 1)?;
        // PRAGMA does not take bound parameters; the value is our own integer.
        tx.execute_batch(&format!("PRAGMA user_version = {}", index + 1))
            .map_err(sqlite("recording schema version"))?;
    }
    tx.commit().map_err(sqlite("committing migration"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use bulwark_audit::{AuditRecord, Decision};

    fn record(n: u64) -> AuditRecord {
        AuditRecord {
            time_ms: 1_700_000_000_000 + n as i64,
            session: "s".into(),
            agent: "a".into(),
            user: "u".into(),
            action: bulwark_audit::Action::ToolCall,
            tool: "shell".into(),
            operation: "exec".into(),
            args_digest: "d".into(),
            decision: Decision::Denied,
            reason: format!("r{n}").into(),
            detail: "ü".into(),
            duration_us: n,
        }
    }

    #[test]
    fn v2_backfills_leaf_hashes_of_v1_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 1).unwrap();
        // More rows than one backfill chunk.
        let rows = BACKFILL_CHUNK as u64 + 5;
        {
            let tx = conn.transaction().unwrap();
            for n in 0..rows {
                let r = record(n);
                tx.execute(
                    "INSERT INTO audit (time_ms, session, agent, user, action, tool, \
                     operation, args_digest, decision, reason, detail, duration_us) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                    rusqlite::params![
                        r.time_ms,
                        r.session,
                        r.agent,
                        r.user,
                        r.action.as_str(),
                        r.tool,
                        r.operation,
                        r.args_digest,
                        r.decision.as_str(),
                        r.reason.as_str(),
                        r.detail,
                        r.duration_us as i64
                    ],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        migrate(&mut conn).unwrap();
        let leaf: Vec<u8> = conn
            .query_row("SELECT leaf FROM audit WHERE seq = 3", [], |r| r.get(0))
            .unwrap();
        assert_eq!(leaf, record(2).leaf_hash(3).unwrap());
        // The update trigger is back.
        assert!(conn.execute("UPDATE audit SET leaf = NULL", []).is_err());
        let sink = Store::from_connection(conn).audit_sink();
        let report = sink.verify().unwrap();
        assert_eq!(report.problem, None);
        assert_eq!(report.records, rows);
        assert_eq!(sink.append(&record(rows)).unwrap(), rows + 1);
        assert!(sink.verify().unwrap().is_ok());
    }

    #[test]
    fn v8_adds_the_label_table_to_a_v7_database() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 7).unwrap();
        let before: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'provenance'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(before, 0);
        migrate(&mut conn).unwrap();
        let store = Store::from_connection(conn);
        store
            .record_provenance("workspace:u/a", "f", &[1; 32], &["external"], "c")
            .unwrap();
        assert_eq!(
            store.provenance("workspace:u/a", "f", &[1; 32]).unwrap(),
            Some(vec!["external".to_string()])
        );
    }

    #[test]
    fn v3_keeps_the_rows_and_checkpoints_of_a_v2_log() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 2).unwrap();
        let store = Store::from_connection(conn);
        let sink = store.audit_sink();
        let key = bulwark_audit::generate_signing_key();
        let records: Vec<AuditRecord> = (0..41).map(record).collect();
        for r in &records {
            sink.append(r).unwrap();
        }
        // A checkpoint as v2 stored it, with no frontier column.
        let leaves: Vec<_> = (1..)
            .zip(&records)
            .map(|(seq, r)| r.leaf_hash(seq).unwrap())
            .collect();
        let root = bulwark_audit::root(&leaves);
        let checkpoint = bulwark_audit::Checkpoint::new("o/a", 41, root);
        let note = bulwark_audit::sign(&checkpoint, &key, "o/a").unwrap();
        store
            .lock()
            .unwrap()
            .execute(
                "INSERT INTO audit_checkpoint (size, root, note, time_ms) VALUES (41, ?1, ?2, 7)",
                rusqlite::params![root.as_slice(), note],
            )
            .unwrap();

        // Upgrade in place, twice (the second is a no-op).
        for _ in 0..2 {
            migrate(&mut store.lock().unwrap()).unwrap();
        }
        let version: u32 = store
            .lock()
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let kept: Vec<_> = sink.newest(100).unwrap();
        assert_eq!(kept.len(), records.len());
        assert!(kept.iter().zip(&records).all(|(k, r)| k.record == *r));
        let latest = sink.latest_checkpoint().unwrap().unwrap();
        assert_eq!((latest.size, latest.root, latest.note), (41, root, note));

        // The old checkpoint is still checked, but cannot anchor an
        // incremental check: that falls back to a full one...
        let full = sink.verify().unwrap();
        assert_eq!((full.problem, full.checkpoints_checked), (None, 1));
        let since = sink.verify_since_latest_checkpoint().unwrap();
        assert!(
            matches!(&since.coverage, crate::Coverage::FullFallback { reason } if reason.contains("frontier")),
            "{:?}",
            since.coverage
        );
        assert_eq!((since.problem, since.root), (None, root));
        // ...until the first checkpoint after the upgrade stores a frontier.
        sink.append(&record(41)).unwrap();
        sink.checkpoint_incremental(&key, "o/a", "o/a").unwrap();
        let since = sink.verify_since_latest_checkpoint().unwrap();
        assert_eq!(
            since.coverage,
            crate::Coverage::SinceCheckpoint { size: 42 }
        );
        assert_eq!(sink.verify().unwrap().checkpoints_checked, 2);
    }
}
