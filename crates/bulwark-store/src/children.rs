//! Child agents: which session spawned which agent, the ledger account it
//! spends from, and where it is in its lifecycle. The record and the
//! child's account are created in one transaction, so a child never exists
//! without its account or the other way round.

use crate::ledger::{AccountKind, Actor, LedgerError, Policy, Step, insert_account, record};
use crate::{Store, StoreError, now_ms, sqlite};
use bulwark_audit::Decision;
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Where a child agent is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildState {
    /// It may be given work.
    Running,
    /// Recalled: its credits went back to the parent; final.
    Stopped,
    /// Its account could not pay for its next model call; funding it again
    /// makes it running.
    Exhausted,
}

impl ChildState {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildState::Running => "running",
            ChildState::Stopped => "stopped",
            ChildState::Exhausted => "exhausted",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "running" => ChildState::Running,
            "stopped" => ChildState::Stopped,
            "exhausted" => ChildState::Exhausted,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "unknown child state {other:?}"
                )));
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildRecord {
    pub id: String,
    pub parent_session: String,
    /// The account that funds it and receives its credits on recall.
    pub parent_account: String,
    pub user: String,
    /// The child's agent (manifest) name.
    pub agent: String,
    pub account: String,
    pub state: ChildState,
    pub created_ms: i64,
}

const COLUMNS: &str = "id, parent_session, parent_account, user, agent, account, state, created_ms";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(ChildRecord, String)> {
    Ok((
        ChildRecord {
            id: r.get(0)?,
            parent_session: r.get(1)?,
            parent_account: r.get(2)?,
            user: r.get(3)?,
            agent: r.get(4)?,
            account: r.get(5)?,
            state: ChildState::Running,
            created_ms: r.get(7)?,
        },
        r.get(6)?,
    ))
}

fn finish((mut c, state): (ChildRecord, String)) -> Result<ChildRecord, StoreError> {
    c.state = ChildState::parse(&state)?;
    Ok(c)
}

impl Store {
    /// Records a spawned child and opens its account (zero balance,
    /// `policy`), audited, in one transaction. The state is `running`.
    pub fn create_child(
        &self,
        actor: &Actor,
        child: &ChildRecord,
        policy: &Policy,
    ) -> Result<(), LedgerError> {
        let request = json!({"op": "spawn", "child": child.id, "agent": child.agent,
            "account": child.account, "parent_account": child.parent_account});
        self.ledger_write("child creation", |tx, now| {
            insert_account(tx, &child.account, AccountKind::Agent, policy)?;
            tx.prepare_cached(&format!(
                "INSERT INTO child_agents ({COLUMNS}, updated_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?7)"
            ))
            .map_err(sqlite("preparing child insert"))?
            .execute(params![
                child.id,
                child.parent_session,
                child.parent_account,
                child.user,
                child.agent,
                child.account,
                now
            ])
            .map_err(sqlite("inserting child agent"))?;
            let reason = format!("spawned child {:?} ({})", child.id, child.agent);
            Ok(Step::Commit(
                (),
                record(actor, now, "spawn", &request, Decision::Allowed, reason),
            ))
        })
    }

    pub fn child(&self, id: &str) -> Result<Option<ChildRecord>, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(&format!("SELECT {COLUMNS} FROM child_agents WHERE id = ?1"))
            .map_err(sqlite("preparing child read"))?
            .query_row([id], from_row)
            .optional()
            .map_err(sqlite("reading child agent"))?
            .map(finish)
            .transpose()
    }

    /// The children a session spawned, oldest first.
    pub fn children_of(&self, parent_session: &str) -> Result<Vec<ChildRecord>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM child_agents WHERE parent_session = ?1 ORDER BY created_ms, id"
            ))
            .map_err(sqlite("preparing child list"))?;
        let rows = stmt
            .query_map([parent_session], from_row)
            .map_err(sqlite("listing child agents"))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(finish(row.map_err(sqlite("reading child row"))?)?);
        }
        Ok(out)
    }

    /// Moves a child to `state`. Stopped is final (a trigger refuses a
    /// change out of it).
    pub fn set_child_state(&self, id: &str, state: ChildState) -> Result<(), StoreError> {
        let conn = self.lock()?;
        let changed = conn
            .prepare_cached("UPDATE child_agents SET state = ?2, updated_ms = ?3 WHERE id = ?1")
            .map_err(sqlite("preparing child state update"))?
            .execute(params![id, state.as_str(), now_ms()])
            .map_err(sqlite("updating child state"))?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("child agent {id:?}")));
        }
        Ok(())
    }
}
