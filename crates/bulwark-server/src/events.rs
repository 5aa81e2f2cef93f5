//! Security events the server writes to the audit log: failed sign-ins
//! (aggregated), access.toml reloads, and turns stopped by a revocation.
//!
//! Records use the shared vocabulary of security events: empty `session`
//! and `tool`, `user` the one who acted or was acted on, `args_digest` the
//! SHA-256 of the canonical JSON of what the record is about, and a
//! `detail` that never holds a token or any other secret.
//!
//! Failed sign-ins are counted in memory per client network (the /24 or
//! /64 the failure throttle uses) and written as one `auth_failure` record
//! per network and window ([`Limits::auth_failure_window`](crate::Limits),
//! default a minute) with the count: one attempt never writes a record, so
//! a guesser cannot grow the log by guessing, and what was guessed is
//! never stored.

use crate::limits::failure_network;
use bulwark_audit::{Action, AuditRecord, AuditSink, Decision, Event, Identity, Reason};
use serde_json::json;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Networks counted at once; failures from further networks in the same
/// window are added to one overflow record (the map cannot grow without
/// bound under a spread-out attack).
const MAX_NETWORKS: usize = 10_000;

struct Window {
    started: Instant,
    started_ms: i64,
    count: u64,
}

/// Writes the server's security events.
pub struct SecurityLog {
    sink: Arc<dyn AuditSink>,
    window: Duration,
    failures: Mutex<HashMap<Option<IpAddr>, Window>>,
}

pub(crate) fn now_ms() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos() as i64 / 1_000_000
}

impl SecurityLog {
    pub fn new(sink: Arc<dyn AuditSink>, window: Duration) -> Self {
        Self {
            sink,
            window: window.max(Duration::from_millis(1)),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one failed sign-in from `ip`.
    pub fn auth_failed(&self, ip: IpAddr) {
        let network = failure_network(ip);
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let key = if failures.len() >= MAX_NETWORKS && !failures.contains_key(&Some(network)) {
            None
        } else {
            Some(network)
        };
        failures
            .entry(key)
            .or_insert_with(|| Window {
                started: Instant::now(),
                started_ms: now_ms(),
                count: 0,
            })
            .count += 1;
    }

    /// Writes one record per network whose window has ended (every window
    /// when `all`, at shutdown) and flushes them. Blocking: call it off
    /// the async threads.
    pub fn flush_failures(&self, all: bool) {
        let due: Vec<(Option<IpAddr>, Window)> = {
            let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<Option<IpAddr>> = failures
                .iter()
                .filter(|(_, w)| all || w.started.elapsed() >= self.window)
                .map(|(k, _)| *k)
                .collect();
            keys.into_iter()
                .filter_map(|k| failures.remove(&k).map(|w| (k, w)))
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let end_ms = now_ms();
        for (network, window) in due {
            let (net, prefix) = match network {
                Some(IpAddr::V4(v4)) => (v4.to_string(), "/24"),
                Some(IpAddr::V6(v6)) => (v6.to_string(), "/64"),
                None => ("other networks".to_owned(), ""),
            };
            let args = json!({
                "network": format!("{net}{prefix}"),
                "count": window.count,
                "from_ms": window.started_ms,
                "to_ms": end_ms,
            });
            self.write(
                Action::AuthFailure,
                "sign_in",
                "",
                Decision::Denied,
                Reason::InvalidToken,
                &args,
                format!(
                    "{} failed sign-in(s) from {net}{prefix} in {} s",
                    window.count,
                    ((end_ms - window.started_ms).max(0) / 1000).max(1)
                ),
            );
        }
        self.flush();
    }

    /// Records an access.toml reload (`config_reload`, operation `access`).
    pub fn config_reload(&self, generation: u64, users: usize, problem: Option<&str>) {
        let args = json!({ "file": "access.toml", "generation": generation, "users": users });
        let (decision, reason, detail) = match problem {
            None => (
                Decision::Allowed,
                Reason::Reloaded,
                format!("access.toml reloaded (version {generation}, {users} users)"),
            ),
            Some(p) => (
                Decision::Denied,
                Reason::Invalid,
                format!("access.toml reloaded but refused, nobody can sign in: {p}"),
            ),
        };
        self.write(
            Action::ConfigReload,
            "access",
            "",
            decision,
            reason,
            &args,
            detail,
        );
        self.flush();
    }

    /// Records that a revocation or rotation of `user`'s tokens stopped
    /// their running conversations.
    pub fn revocation(&self, user: &str, why: &str, conversations: &[String]) {
        let args = json!({ "user": user, "sessions": conversations });
        self.write(
            Action::Revocation,
            "stop_turns",
            user,
            Decision::Allowed,
            Reason::parse(why.to_owned()),
            &args,
            format!(
                "{why}: stopped {} running conversation(s) of `{user}` and their turns",
                conversations.len()
            ),
        );
        self.flush();
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        action: Action,
        operation: &str,
        user: &str,
        decision: Decision,
        reason: Reason,
        args: &serde_json::Value,
        detail: String,
    ) {
        let record = AuditRecord::new(
            Identity::new("", "", user),
            Event::new(action, decision, reason)
                .operation(operation)
                .args(args)
                .detail(detail),
        );
        if let Err(error) = self.sink.record(&record) {
            tracing::error!(%error, action = %record.action, "a security event could not be audited");
        }
    }

    fn flush(&self) {
        if let Err(error) = self.sink.flush() {
            tracing::error!(%error, "security events could not be flushed to the audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulwark_audit::MemorySink;

    #[test]
    fn failures_are_one_record_per_network_and_window() {
        let sink = Arc::new(MemorySink::new());
        let log = SecurityLog::new(sink.clone(), Duration::from_secs(3600));
        for last in [1u8, 2, 3, 200] {
            log.auth_failed(IpAddr::from([192, 0, 2, last]));
        }
        log.auth_failed(IpAddr::from([198, 51, 100, 1]));
        log.flush_failures(false);
        assert!(sink.records().is_empty(), "the window is still open");
        log.flush_failures(true);
        let records = sink.records();
        assert_eq!(records.len(), 2, "{records:?}");
        let r = records
            .iter()
            .find(|r| r.detail.contains("192.0.2.0/24"))
            .unwrap();
        assert_eq!(
            (r.action.as_str(), r.decision),
            ("auth_failure", Decision::Denied)
        );
        assert!(r.detail.starts_with("4 failed"), "{}", r.detail);
        log.flush_failures(true);
        assert_eq!(sink.records().len(), 2, "counted once");
    }
}
