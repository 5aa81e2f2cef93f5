//! Where the agent loop keeps a conversation: its messages, its state and
//! the tokens its model calls used.
//!
//! A trait, not the SQLite [`Store`] itself, because a served session's
//! worker process must not open the shared database (it holds every
//! user's conversations): its implementation asks the server, which
//! performs each operation for that worker's own session only.

use bulwark_store::{Store, StoreError};

/// The conversation operations the loop needs.
pub trait ConversationStore: Send + Sync {
    /// Appends one message (`role` is `user` or `assistant`).
    fn append_message(
        &self,
        session: &str,
        role: &str,
        content_json: &str,
    ) -> Result<(), StoreError>;
    /// Every stored message of `session`, oldest first, as stored JSON.
    fn messages(&self, session: &str) -> Result<Vec<String>, StoreError>;
    /// Replaces the session's opaque state.
    fn save_state(&self, session: &str, state_json: &str) -> Result<(), StoreError>;
    /// Records the tokens of one model call of `session` (owned by `user`).
    fn record_tokens(&self, session: &str, user: &str, tokens: u64) -> Result<(), StoreError>;
}

impl ConversationStore for Store {
    fn append_message(
        &self,
        session: &str,
        role: &str,
        content_json: &str,
    ) -> Result<(), StoreError> {
        Store::append_message(self, session, role, content_json).map(|_| ())
    }

    fn messages(&self, session: &str) -> Result<Vec<String>, StoreError> {
        Ok(Store::messages(self, session)?
            .into_iter()
            .map(|row| row.content_json)
            .collect())
    }

    fn save_state(&self, session: &str, state_json: &str) -> Result<(), StoreError> {
        Store::save_state(self, session, state_json)
    }

    fn record_tokens(&self, session: &str, user: &str, tokens: u64) -> Result<(), StoreError> {
        Store::record_tokens(self, session, user, tokens)
    }
}
