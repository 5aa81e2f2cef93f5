//! The typed vocabulary of audit records: what happened ([`Action`]), why it
//! was decided the way it was ([`Reason`]), who it happened to
//! ([`Identity`]) and the rest of the event ([`Event`]).
//!
//! Both enums serialize as exactly the strings the log has always held, so
//! typing them changed no byte of the canonical encoding, of a stored leaf
//! or of a checkpoint. A log may hold a string this build does not know
//! (written by a newer or older build, or descriptive text such as the
//! ledger's reasons): it decodes to `Other` and re-encodes to the same
//! bytes, because a verifier that refused unknown words could not verify a
//! log written by another version.

use crate::Decision;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Declares a string vocabulary: known words as unit variants plus
/// `Other(String)`, equal (and hashed) by their text, so `Other("tool_call")`
/// and `ToolCall` are the same value, as they are the same bytes.
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A word this build has no variant for: kept verbatim so the
            /// record re-encodes to the bytes it was read from.
            Other(String),
        }

        impl $name {
            /// Every known word, in declaration order.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),*];

            /// The word as stored.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )*
                    $name::Other(text) => text,
                }
            }

            /// The known variant spelled `text`, or `Other(text)`. Never
            /// fails: logs hold words of other builds.
            pub fn parse(text: impl Into<Cow<'static, str>>) -> Self {
                let text = text.into();
                match text.as_ref() {
                    $( $text => $name::$variant, )*
                    _ => $name::Other(text.into_owned()),
                }
            }

            /// Whether this build knows the word.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.as_str() == other.as_str()
            }
        }
        impl Eq for $name {}
        impl Hash for $name {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.as_str().hash(state);
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map($name::parse)
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                $name::parse(text)
            }
        }

    };
}

vocabulary! {
    /// What kind of event a record is.
    pub enum Action {
        /// The final record of one door dispatch: exactly one per call.
        ToolCall => "tool_call",
        /// A call's redacted canonical arguments (`[audit] record_arguments`).
        Arguments => "arguments",
        /// A human's answer to an approval request.
        Approval => "approval",
        /// A loop-guard warning.
        LoopGuard => "loop_guard",
        /// A credential injected into (or withheld from) a request.
        Credential => "credential",
        /// A missing confinement layer, or a strict sandbox's refusal.
        Sandbox => "sandbox",
        /// A process the shell tool started.
        Spawn => "spawn",
        /// The subset check of a child agent's spawn.
        SpawnCheck => "spawn_check",
        /// A call to the model.
        ModelCall => "model_call",
        /// A taint decision: an untrusted label reached a sink (allowed,
        /// sent for approval or refused), with the label, its source call
        /// and the sink in the detail.
        Taint => "taint",
        /// The injection scanner found something in untrusted content.
        InjectionScan => "injection_scan",
        /// A movement in the credits ledger.
        Ledger => "ledger",
        /// The configuration a session was started with (or rolled back to).
        ConfigLoad => "config_load",
        /// A session started with its effective policy.
        SessionStart => "session_start",
        /// A session lease refused because another process holds it.
        SessionLease => "session_lease",
        /// The audit log's signing key introduced or handed over.
        AuditKey => "audit_key",
        /// An operator changed which keys are trusted.
        KeyTrust => "key_trust",
        /// An operator signed an agent.
        AgentSign => "agent_sign",
        /// An operator changed who may use what (access.toml).
        AccessChange => "access_change",
        /// Failed sign-ins of one network in one window.
        AuthFailure => "auth_failure",
        /// The server reloaded access.toml.
        ConfigReload => "config_reload",
        /// A revocation or rotation stopped a user's conversations.
        Revocation => "revocation",
        /// A ledger account's spending policy changed.
        CreditsPolicy => "credits_policy",
        /// An MCP server's tools against their pins: a pin written by
        /// `bulwark mcp pin`, or a server refused because a tool changed
        /// or appeared since it was pinned (a rug pull).
        McpPin => "mcp_pin",
        /// One request a sandboxed program made through the egress proxy
        /// (host, port, allowed or refused, bytes; never its contents).
        Egress => "egress",
    }
}

vocabulary! {
    /// The reason class of a decision, short and machine-friendly.
    pub enum Reason {
        /// The call ran.
        Ok => "ok",
        /// The session had been stopped before the call.
        Stopped => "stopped",
        /// No tool has the name the model used.
        UnknownTool => "unknown_tool",
        /// The loop guard blocked or broke the session.
        LoopGuard => "loop_guard",
        /// The agent holds no grant for the tool's domain.
        Tool => "tool",
        /// The agent holds no grant for the tool's operation.
        Operation => "operation",
        /// No capability covers a concrete demand (or a per-call limit).
        Capability => "capability",
        /// The exec policy refused a command.
        ExecPolicy => "exec_policy",
        /// A human approval was asked (`approval` records) or refused.
        Approval => "approval",
        /// An audit record the call depended on could not be written.
        Audit => "audit",
        /// The credits ledger refused or failed.
        Credits => "credits",
        /// The arguments did not fit the tool's schema.
        InvalidArgs => "invalid_args",
        /// A path argument was refused.
        Path => "path",
        /// A tool reached for a resource the door had not approved.
        Scope => "scope",
        /// The egress client refused the destination.
        Egress => "egress",
        /// A request carried a secret value.
        Exfiltration => "exfiltration",
        /// The process sandbox could not be set up.
        Sandbox => "sandbox",
        /// A child would hold more than its parent.
        SpawnCheck => "spawn_check",
        /// The tool ran and reported an error.
        ToolError => "tool_error",
        /// The dispatch was dropped before the call finished.
        Cancelled => "cancelled",
        /// A `[taint]` sink rule decided (approval or refusal).
        Taint => "taint",
        /// The injection scanner's finding (advisory).
        Injection => "injection",
        /// An `arguments` record.
        Arguments => "arguments",
        /// A `credential` record.
        Credential => "credential",
        /// A `spawn` record.
        Spawn => "spawn",
        /// A model call used more than it reserved.
        ModelOverrun => "model_overrun",
        /// A `config_load` record of a started session.
        ConfigLoad => "config_load",
        /// A configuration rolled back to its last good version.
        Rollback => "rollback",
        /// A `session_start` record.
        PolicyLoad => "policy_load",
        /// A refused session lease.
        SessionLease => "session_lease",
        /// An operator's own action.
        Operator => "operator",
        /// A sign-in with a token that does not verify.
        InvalidToken => "invalid_token",
        /// A configuration reloaded and in force.
        Reloaded => "reloaded",
        /// A configuration reloaded but refused.
        Invalid => "invalid",
        /// Tokens revoked.
        Revoked => "revoked",
        /// Tokens rotated.
        Rotated => "rotated",
        /// An MCP server's live tools differ from its pins.
        PinDrift => "pin_drift",
        /// An operator pinned an MCP server's tools.
        Pinned => "pinned",
        /// No reason class (records that need none, such as `audit_key`).
        Empty => "",
    }
}

/// Who a record is about: the session, its agent and its user (each empty
/// when the event has none, as for server security events).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub session: String,
    pub agent: String,
    pub user: String,
}

impl Identity {
    pub fn new(
        session: impl Into<String>,
        agent: impl Into<String>,
        user: impl Into<String>,
    ) -> Self {
        Self {
            session: session.into(),
            agent: agent.into(),
            user: user.into(),
        }
    }
}

/// Everything of a record but its identity and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub action: Action,
    pub tool: String,
    pub operation: String,
    /// Hex SHA-256 of the canonical JSON arguments (empty when there were none).
    pub args_digest: String,
    pub decision: Decision,
    pub reason: Reason,
    /// Human-readable detail. Must never contain secret values.
    pub detail: String,
    pub duration_us: u64,
}

impl Event {
    /// An event with empty tool, operation, digest and detail.
    pub fn new(action: Action, decision: Decision, reason: Reason) -> Self {
        Self {
            action,
            tool: String::new(),
            operation: String::new(),
            args_digest: String::new(),
            decision,
            reason,
            detail: String::new(),
            duration_us: 0,
        }
    }
    pub fn tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = tool.into();
        self
    }
    pub fn operation(mut self, operation: impl Into<String>) -> Self {
        self.operation = operation.into();
        self
    }
    /// The digest of `args` ([`AuditRecord::digest_args`](crate::AuditRecord::digest_args)).
    pub fn args(mut self, args: &serde_json::Value) -> Self {
        self.args_digest = crate::AuditRecord::digest_args(args);
        self
    }
    pub fn digest(mut self, args_digest: impl Into<String>) -> Self {
        self.args_digest = args_digest.into();
        self
    }
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }
    pub fn duration_us(mut self, duration_us: u64) -> Self {
        self.duration_us = duration_us;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_word_parses_back_to_itself() {
        for action in Action::KNOWN {
            assert!(Action::parse(action.as_str().to_owned()).is_known());
            assert_eq!(&Action::parse(action.as_str().to_owned()), action);
        }
        for reason in Reason::KNOWN {
            assert!(Reason::parse(reason.as_str().to_owned()).is_known());
            assert_eq!(&Reason::parse(reason.as_str().to_owned()), reason);
        }
    }

    #[test]
    fn words_are_distinct() {
        let mut actions: Vec<&str> = Action::KNOWN.iter().map(Action::as_str).collect();
        actions.sort_unstable();
        actions.dedup();
        assert_eq!(actions.len(), Action::KNOWN.len());
        let mut reasons: Vec<&str> = Reason::KNOWN.iter().map(Reason::as_str).collect();
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), Reason::KNOWN.len());
    }

    #[test]
    fn unknown_words_survive_a_round_trip() {
        let action: Action = serde_json::from_str("\"from_a_newer_build\"").unwrap();
        assert_eq!(action, Action::Other("from_a_newer_build".into()));
        assert_eq!(
            serde_json::to_string(&action).unwrap(),
            "\"from_a_newer_build\""
        );
        let reason = Reason::parse("minted 5 into user:alice");
        assert!(!reason.is_known());
        assert_eq!(reason.as_str(), "minted 5 into user:alice");
    }

    #[test]
    fn other_spelling_a_known_word_is_that_word() {
        assert_eq!(Action::Other("tool_call".into()), Action::ToolCall);
        assert_eq!(Reason::parse("ok"), Reason::Ok);
        assert!(Reason::parse("ok").is_known());
    }
}
