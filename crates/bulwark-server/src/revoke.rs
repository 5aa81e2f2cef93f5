//! What a revocation or rotation stops.
//!
//! Closing a revoked user's WebSockets is not enough: their conversations
//! belong to the server and would run their turns, the messages queued
//! behind them and their tools until the detach grace ends. A user whose
//! tokens were removed or replaced has every running conversation stopped
//! at once: its worker is killed (its tool processes die with it), without
//! the grace a normal shutdown gets.

use crate::auth::AuthSnapshot;
use crate::ws::session::Hub;

/// Users of `old` who held tokens that `new` no longer accepts: removed
/// from the file, or a token gone or its hash changed. With the reason
/// written to the audit record: `revoked` (no token left) or `rotated`.
pub fn revoked_users(old: &AuthSnapshot, new: &AuthSnapshot) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for (user, entry) in &old.access.users {
        if entry.tokens.is_empty() {
            continue;
        }
        let Some(now) = new.access.users.get(user) else {
            out.push((user.to_string(), "revoked"));
            continue;
        };
        let all_still_valid = entry.tokens.iter().all(|t| {
            now.tokens
                .iter()
                .any(|n| n.id == t.id && n.hash.eq_ignore_ascii_case(&t.hash))
        });
        if !all_still_valid {
            let why = if now.tokens.is_empty() {
                "revoked"
            } else {
                "rotated"
            };
            out.push((user.to_string(), why));
        }
    }
    out
}

/// Stops every live conversation of `user` opened with a token `now` no
/// longer accepts (or with a token not recorded); their session ids. One
/// opened since with a new token runs on: the watcher that calls this can
/// lag behind the file, and a user who rotated and reconnected must not
/// lose the conversation they started with the new token.
pub fn stop_user(hub: &Hub, user: &str, now: &AuthSnapshot) -> Vec<String> {
    let mut stopped = Vec::new();
    for live in hub.all() {
        let still_valid = live
            .opened_with
            .as_ref()
            .is_some_and(|t| now.still_accepts(user, t));
        if live.user == user && !live.is_ended() && !still_valid {
            live.revoke();
            stopped.push(live.id.clone());
        }
    }
    stopped.sort();
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(text: &str) -> AuthSnapshot {
        AuthSnapshot::build(1, Some(text), "access.toml", Ok(None))
    }

    const A1: &str = "{ id = \"aaaaaaaa\", hash = \"0000000000000000000000000000000000000000000000000000000000000000\" }";
    const A2: &str = "{ id = \"bbbbbbbb\", hash = \"1111111111111111111111111111111111111111111111111111111111111111\" }";
    const A3: &str = "{ id = \"cccccccc\", hash = \"2222222222222222222222222222222222222222222222222222222222222222\" }";

    #[test]
    fn removed_or_replaced_tokens_are_revocations_and_additions_are_not() {
        let before = snap(&format!(
            "[users.alice]\ntokens = [{A1}]\n[users.bob]\ntokens = [{A2}]\n[users.carol]\n"
        ));
        let same = snap(&format!(
            "[users.alice]\ntokens = [{A1}, {A3}]\n[users.bob]\ntokens = [{A2}]\n"
        ));
        assert!(
            revoked_users(&before, &same).is_empty(),
            "an added token revokes nothing"
        );
        let rotated = snap(&format!(
            "[users.alice]\ntokens = [{A3}]\n[users.bob]\ntokens = []\n"
        ));
        let mut r = revoked_users(&before, &rotated);
        r.sort();
        assert_eq!(
            r,
            vec![("alice".into(), "rotated"), ("bob".into(), "revoked")]
        );
        let gone = snap("[users.carol]\n");
        assert_eq!(revoked_users(&before, &gone).len(), 2);
        let rehashed = snap(&format!(
            "[users.alice]\ntokens = [{{ id = \"aaaaaaaa\", hash = \"{}\" }}]\n[users.bob]\ntokens = [{A2}]\n",
            "f".repeat(64)
        ));
        assert_eq!(
            revoked_users(&before, &rehashed),
            vec![("alice".into(), "rotated")]
        );
    }

    struct Nothing;
    impl crate::backend::ConversationControl for Nothing {
        fn kill(&self) {}
    }

    fn open(hub: &Hub, id: &str, user: &str, token: Option<crate::auth::TokenRef>) {
        let (commands, _) = tokio::sync::mpsc::channel(1);
        let (_, events) = tokio::sync::mpsc::channel(1);
        let conversation = crate::backend::Conversation {
            session_id: id.into(),
            history_messages: 0,
            commands,
            events,
            control: Box::new(Nothing),
        };
        assert!(
            hub.register(conversation, user, "a", token, 8, 1 << 16)
                .is_ok()
        );
    }

    /// The revocation watcher can lag behind access.toml: by the time it
    /// compares the old file with the new, a rotated user may already have
    /// reconnected and opened a conversation with the new token. Only the
    /// conversations of tokens the new file no longer accepts are stopped.
    #[test]
    fn a_rotation_stops_the_old_tokens_conversations_and_not_ones_opened_since() {
        let before = snap(&format!(
            "[users.alice]\ntokens = [{A1}]\n[users.bob]\ntokens = [{A2}]\n"
        ));
        let after = snap(&format!(
            "[users.alice]\ntokens = [{A3}]\n[users.bob]\ntokens = [{A2}]\n"
        ));
        let hub = Hub::default();
        open(&hub, "old", "alice", before.token_ref("aaaaaaaa"));
        open(&hub, "new", "alice", after.token_ref("cccccccc"));
        open(&hub, "unknown", "alice", None);
        open(&hub, "bob", "bob", before.token_ref("bbbbbbbb"));
        assert_eq!(
            revoked_users(&before, &after),
            vec![("alice".into(), "rotated")]
        );
        assert_eq!(stop_user(&hub, "alice", &after), vec!["old", "unknown"]);
        let revoked = |id: &str| hub.all().iter().any(|l| l.id == id && l.is_revoked());
        assert!(revoked("old") && revoked("unknown"));
        assert!(!revoked("new"), "opened with the new token");
        assert!(!revoked("bob"), "another user");
        // A token re-hashed under the same id is not the token it was.
        let rehashed = snap(&format!(
            "[users.alice]\ntokens = [{{ id = \"cccccccc\", hash = \"{}\" }}]\n",
            "e".repeat(64)
        ));
        assert_eq!(
            stop_user(&hub, "alice", &rehashed),
            vec!["new", "old", "unknown"]
        );
        // Bob's token handed to another user name is not bob's any more.
        let moved = snap(&format!("[users.carol]\ntokens = [{A2}]\n"));
        assert_eq!(stop_user(&hub, "bob", &moved), vec!["bob"]);
    }
}
