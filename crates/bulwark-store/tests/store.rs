//! Sessions, messages and state: round trips, resume, refusal of bad input,
//! and the file's permissions.

use bulwark_store::{NewSession, Store, StoreError};
use std::path::Path;

fn new_session(id: &str, agent: &str) -> NewSession {
    NewSession {
        id: id.into(),
        agent: agent.into(),
        user: "alice".into(),
    }
}

fn count_rows(path: &Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[test]
fn session_round_trip() {
    let store = Store::open_in_memory().unwrap();
    assert!(store.session("s1").unwrap().is_none());
    store.create_session(&new_session("s1", "coder")).unwrap();
    let row = store.session("s1").unwrap().unwrap();
    assert_eq!(row.id, "s1");
    assert_eq!(row.agent, "coder");
    assert_eq!(row.user, "alice");
    assert_eq!(row.created_ms, row.updated_ms);
    assert!(row.created_ms > 0);
    assert_eq!(row.state_json, None);
    assert_eq!(row.message_count, 0);
}

#[test]
fn duplicate_session_is_conflict_and_keeps_original() {
    let store = Store::open_in_memory().unwrap();
    store.create_session(&new_session("s1", "coder")).unwrap();
    let err = store
        .create_session(&new_session("s1", "attacker"))
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert_eq!(store.session("s1").unwrap().unwrap().agent, "coder");
}

#[test]
fn messages_round_trip_in_order_and_touch_session() {
    let store = Store::open_in_memory().unwrap();
    store.create_session(&new_session("s1", "coder")).unwrap();
    let before = store.session("s1").unwrap().unwrap();
    let a = store
        .append_message("s1", "user", r#"{"text":"hi"}"#)
        .unwrap();
    let b = store
        .append_message("s1", "assistant", r#"{"text":"hello"}"#)
        .unwrap();
    assert!(b > a);
    let msgs = store.messages("s1").unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!((msgs[0].id, msgs[0].role.as_str()), (a, "user"));
    assert_eq!(msgs[0].content_json, r#"{"text":"hi"}"#);
    assert_eq!((msgs[1].id, msgs[1].role.as_str()), (b, "assistant"));
    let after = store.session("s1").unwrap().unwrap();
    assert_eq!(after.message_count, 2);
    assert!(after.updated_ms >= before.updated_ms);
    assert_eq!(after.created_ms, before.created_ms);
}

#[test]
fn messages_of_sessions_do_not_mix() {
    let store = Store::open_in_memory().unwrap();
    store.create_session(&new_session("a", "x")).unwrap();
    store.create_session(&new_session("b", "x")).unwrap();
    store.append_message("a", "user", "1").unwrap();
    store.append_message("b", "user", "2").unwrap();
    store.append_message("a", "user", "3").unwrap();
    let a: Vec<_> = store
        .messages("a")
        .unwrap()
        .into_iter()
        .map(|m| m.content_json)
        .collect();
    assert_eq!(a, ["1", "3"]);
    assert_eq!(store.messages("b").unwrap().len(), 1);
    assert!(store.messages("b").unwrap()[0].content_json == "2");
}

#[test]
fn state_round_trip_and_overwrite() {
    let store = Store::open_in_memory().unwrap();
    store.create_session(&new_session("s1", "coder")).unwrap();
    store.save_state("s1", r#"{"guard":1}"#).unwrap();
    store.save_state("s1", r#"{"guard":2}"#).unwrap();
    let row = store.session("s1").unwrap().unwrap();
    assert_eq!(row.state_json.as_deref(), Some(r#"{"guard":2}"#));
}

#[test]
fn list_sessions_newest_first_with_filter_and_limit() {
    let store = Store::open_in_memory().unwrap();
    for (id, agent) in [("s1", "a"), ("s2", "b"), ("s3", "a"), ("s4", "a")] {
        store.create_session(&new_session(id, agent)).unwrap();
    }
    // Activity on an old session does not reorder the listing.
    store.append_message("s1", "user", "{}").unwrap();
    let ids = |rows: Vec<bulwark_store::SessionRow>| -> Vec<String> {
        rows.into_iter().map(|r| r.id).collect()
    };
    assert_eq!(
        ids(store.list_sessions(None, 10).unwrap()),
        ["s4", "s3", "s2", "s1"]
    );
    assert_eq!(
        ids(store.list_sessions(Some("a"), 2).unwrap()),
        ["s4", "s3"]
    );
    assert_eq!(ids(store.list_sessions(Some("b"), 10).unwrap()), ["s2"]);
    assert!(store.list_sessions(Some("nobody"), 10).unwrap().is_empty());
    assert!(store.list_sessions(None, 0).unwrap().is_empty());
    let all = store.list_sessions(None, usize::MAX).unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(all[3].message_count, 1);
}

#[test]
fn unknown_session_is_not_found_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    let store = Store::open(&path).unwrap();
    store.create_session(&new_session("real", "coder")).unwrap();
    store.append_message("real", "user", "{}").unwrap();
    let before = store.session("real").unwrap().unwrap();

    let err = store.append_message("ghost", "user", "{}").unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    let err = store.save_state("ghost", "{}").unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    let err = store.messages("ghost").unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");

    assert_eq!(count_rows(&path, "messages"), 1);
    assert_eq!(count_rows(&path, "sessions"), 1);
    assert_eq!(store.session("real").unwrap().unwrap(), before);
    assert!(store.session("ghost").unwrap().is_none());
}

#[test]
fn hostile_strings_are_data_not_sql() {
    let store = Store::open_in_memory().unwrap();
    let id = "x'); DROP TABLE messages; --";
    store.create_session(&new_session(id, "a\"b")).unwrap();
    store
        .append_message(id, "user'", "'; DELETE FROM sessions; --")
        .unwrap();
    assert_eq!(
        store.messages(id).unwrap()[0].content_json,
        "'; DELETE FROM sessions; --"
    );
    assert_eq!(store.list_sessions(None, 10).unwrap().len(), 1);
}

#[test]
fn messages_cannot_be_rewritten_in_sql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    let store = Store::open(&path).unwrap();
    store.create_session(&new_session("s1", "coder")).unwrap();
    store.append_message("s1", "user", "original").unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let err = conn
        .execute("UPDATE messages SET content_json = 'forged'", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    assert_eq!(store.messages("s1").unwrap()[0].content_json, "original");
}

#[test]
fn resume_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    {
        let store = Store::open(&path).unwrap();
        store.create_session(&new_session("s1", "coder")).unwrap();
        store.create_session(&new_session("s2", "coder")).unwrap();
        for i in 0..50 {
            store
                .append_message("s1", "user", &format!("{{\"n\":{i}}}"))
                .unwrap();
        }
        store.save_state("s1", r#"{"loop":"state"}"#).unwrap();
    }
    let store = Store::open(&path).unwrap();
    let row = store.session("s1").unwrap().unwrap();
    assert_eq!(row.message_count, 50);
    assert_eq!(row.state_json.as_deref(), Some(r#"{"loop":"state"}"#));
    let msgs = store.messages("s1").unwrap();
    let contents: Vec<String> = msgs.iter().map(|m| m.content_json.clone()).collect();
    let expected: Vec<String> = (0..50).map(|i| format!("{{\"n\":{i}}}")).collect();
    assert_eq!(contents, expected);
    assert!(msgs.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(store.list_sessions(None, 10).unwrap().len(), 2);
    // And the reopened store keeps working.
    store.append_message("s2", "user", "{}").unwrap();
}

/// Once the last handle (and clones of it) is dropped, every connection the
/// store opened is closed: the WAL is folded back and the database file alone
/// holds everything, so copying or backing it up right away loses nothing.
/// A background thread that outlived the store kept a connection open and
/// made this depend on timing. The store lives past a few of that thread's
/// checkpoints (it opens its connection lazily, at the first one).
#[test]
fn dropping_the_last_handle_leaves_a_complete_file() {
    for round in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bulwark.db");
        {
            let store = Store::open(&path).unwrap();
            let clone = store.clone();
            store.create_session(&new_session("s1", "coder")).unwrap();
            drop(store);
            for i in 0..30 {
                clone
                    .append_message("s1", "user", &format!("{{\"n\":{i}}}"))
                    .unwrap();
                if i % 10 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(150));
                }
            }
        }
        let wal = dir.path().join("bulwark.db-wal");
        assert!(!wal.exists(), "round {round}: the WAL outlived the store");
        let copy = dir.path().join("copy.db");
        std::fs::copy(&path, &copy).unwrap();
        assert_eq!(count_rows(&copy, "messages"), 30, "round {round}");
    }
}

#[cfg(unix)]
#[test]
fn database_files_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bulwark.db");
    let store = Store::open(&path).unwrap();
    store.create_session(&new_session("s1", "coder")).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    let wal = dir.path().join("bulwark.db-wal");
    assert!(wal.exists(), "WAL mode should create a -wal file");
    assert_eq!(mode(&wal), 0o600);
    drop(store);

    // A pre-existing world-readable file is tightened on open.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _store = Store::open(&path).unwrap();
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn open_fails_cleanly_on_bad_paths() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::open(&dir.path().join("missing/dir/bulwark.db")).unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    let not_db = dir.path().join("notes.txt");
    std::fs::write(&not_db, b"this is not a sqlite database, just some text!").unwrap();
    let err = Store::open(&not_db).unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err:?}");
}

#[test]
fn rows_serialise_for_the_cli() {
    let store = Store::open_in_memory().unwrap();
    store.create_session(&new_session("s1", "coder")).unwrap();
    let row = store.session("s1").unwrap().unwrap();
    let json = serde_json::to_string(&row).unwrap();
    let back: bulwark_store::SessionRow = serde_json::from_str(&json).unwrap();
    assert_eq!(back, row);
}

/// A user's listing is theirs alone and complete, however many sessions
/// other users created after theirs (the server used to scan the newest
/// sessions of everyone and filter, which could hide a user's older ones).
#[test]
fn sessions_of_one_user_are_listed_from_the_index() {
    let store = Store::open_in_memory().unwrap();
    let session = |id: &str, agent: &str, user: &str| NewSession {
        id: id.into(),
        agent: agent.into(),
        user: user.into(),
    };
    store
        .create_session(&session("mine-1", "a", "alice"))
        .unwrap();
    store
        .create_session(&session("mine-2", "b", "alice"))
        .unwrap();
    for i in 0..300 {
        store
            .create_session(&session(&format!("bob-{i}"), "a", "bob"))
            .unwrap();
    }
    let ids = |rows: Vec<bulwark_store::SessionRow>| -> Vec<String> {
        rows.into_iter().map(|r| r.id).collect()
    };
    assert_eq!(
        ids(store.sessions_of(Some("alice"), None, 10).unwrap()),
        ["mine-2", "mine-1"]
    );
    assert_eq!(
        ids(store.sessions_of(Some("alice"), Some("a"), 10).unwrap()),
        ["mine-1"]
    );
    assert!(
        store
            .sessions_of(Some("carol"), None, 10)
            .unwrap()
            .is_empty()
    );
    let bobs = store.sessions_of(Some("bob"), Some("a"), 5).unwrap();
    assert_eq!(bobs.len(), 5);
    assert!(bobs.iter().all(|r| r.user == "bob"));
    assert_eq!(store.sessions_of(None, None, 1000).unwrap().len(), 302);
}
