//! Users and their restrictions (`$BULWARK_HOME/access.toml`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capability::Capability;
use crate::error::{ConfigError, Located, Seg};
use crate::manifest::{AccessMode, Manifest, ToolFilter, is_agent_name};
use crate::names::UserName;
use crate::validate;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessFile {
    /// Keyed by name: a name that breaks the rule fails the parse, with
    /// its table named.
    #[serde(default)]
    pub users: BTreeMap<UserName, UserEntry>,
}

impl AccessFile {
    /// The name the runtime gives the local operator (CLI runs without
    /// `--user`); `bulwark_kernel::LOCAL_USER` is this constant.
    pub const LOCAL_USER: &'static str = "local";

    /// User names that access.toml may not define, each with what it means
    /// to the runtime. Only names the code itself gives a meaning are here:
    ///
    /// - `local` ([`Self::LOCAL_USER`]) is the CLI operator. Its workspaces
    ///   and memory (`users/local/`), its sessions and its `user:local`
    ///   credits are the operator's; an entry would let a token holder be
    ///   the operator on `bulwark serve`.
    ///
    /// Names such as `admin`, `root`, `system` or `audit` were checked and
    /// have no meaning as user names: the role is a field (`role = "admin"`),
    /// the ledger's own accounts are `system:*` (never `user:*`), and audit
    /// key names are a separate namespace. They stay ordinary names.
    pub const RESERVED_USER_NAMES: &'static [(&'static str, &'static str)] = &[(
        Self::LOCAL_USER,
        "is the local operator's own name (CLI runs without --user): its holder would share the operator's workspaces, memory, sessions and credits",
    )];

    /// Why `name` may not hold a token (be created or rotated as a user of
    /// `serve`), or `None` if it may. Its access.toml entry, without tokens,
    /// still narrows the operator's own runs.
    pub fn reserved_user_name(name: &str) -> Option<&'static str> {
        Self::RESERVED_USER_NAMES
            .iter()
            .find(|(reserved, _)| *reserved == name)
            .map(|(_, why)| *why)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    #[serde(default)]
    pub role: UserRole,
    /// Agents this user may use (`"*"` = any the agent's access mode
    /// allows); absent = no restriction beyond the agent's access mode.
    #[serde(default)]
    pub agents: Option<Vec<String>>,
    /// Narrows tools; `allow` absent = no restriction.
    #[serde(default)]
    pub tools: ToolFilter,
    /// A ceiling on capabilities; absent = no ceiling.
    #[serde(default)]
    pub capabilities: Option<Vec<Capability>>,
    /// API tokens for `bulwark serve`. Only an HMAC of each token is kept
    /// (keyed by `keys/server.secret`), so this file never holds anything
    /// that authenticates by itself. Written by `bulwark access`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<TokenEntry>,
    /// Per-user limits for `bulwark serve`; absent = the server's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<UserLimits>,
}

/// One API token, as stored: its public id and the HMAC of the whole token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// The token's public part (`bwk_<id>_...`): names it in listings and
    /// finds its hash without trying every entry. Unique in the file.
    pub id: String,
    /// Lowercase hex HMAC-SHA256 of the whole token under the server secret.
    pub hash: String,
    /// When it was issued (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<toml::value::Datetime>,
}

/// Longest token id accepted in `access.toml`.
pub const MAX_TOKEN_ID_LEN: usize = 32;

/// Limits a server applies to one user, overriding its defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserLimits {
    /// Rate budget in cost units per minute (a REST read costs a few
    /// units, opening a conversation or sending a message many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    /// Concurrent WebSocket connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// Model tokens (input + output) this user's served sessions may use in
    /// any 24 hours. Checked before each turn: a turn that starts under the
    /// budget runs to its end, so the budget can be overrun by one turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_day: Option<u64>,
    /// Credits (model calls and tool costs, priced by `[credits]` of
    /// config.toml) one of this user's sessions may spend. Enforced by the
    /// ledger's holds before each model call, so unlike `tokens_per_day` it
    /// cannot be overrun. 0 = the user may spend nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credits_per_session: Option<u64>,
    /// Credits all of this user's sessions may spend per day (the ledger
    /// counts UTC calendar days); held like `credits_per_session`, so it
    /// cannot be overrun either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credits_per_day: Option<u64>,
    /// Credits all of this user's sessions may spend per month (the ledger
    /// counts UTC calendar months); held like `credits_per_session`, so it
    /// cannot be overrun either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credits_per_month: Option<u64>,
}

impl UserLimits {
    /// Largest accepted credit limit: the ledger keeps amounts as `i64`, so
    /// a larger limit could not be compared with a balance without wrapping.
    pub const MAX_CREDITS: u64 = i64::MAX.unsigned_abs();

    /// Check every limit; `Err` names the offending field and says what
    /// would be accepted. `parse_access` runs this; call it too on limits
    /// built in code (TOML cannot even write a credit limit above
    /// `i64::MAX`, but a `u64` field can hold one).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let counts = [
            ("requests_per_minute", self.requests_per_minute),
            ("max_connections", self.max_connections),
        ];
        for (field, value) in counts {
            if value == Some(0) {
                return Err((
                    field,
                    "must be at least 1 (remove the user's tokens to lock them out)".into(),
                ));
            }
        }
        let credits = [
            ("credits_per_session", self.credits_per_session),
            ("credits_per_day", self.credits_per_day),
            ("credits_per_month", self.credits_per_month),
        ];
        for (field, value) in credits {
            if let Some(v) = value
                && v > Self::MAX_CREDITS
            {
                return Err((
                    field,
                    format!(
                        "{v} is too large; use at most {} (the ledger keeps 64-bit signed amounts), or remove the line for no limit",
                        Self::MAX_CREDITS
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserRole {
    #[default]
    User,
    Admin,
}

/// Parse and validate the access file. `origin` names the file in errors.
pub fn parse_access(src: &str, origin: &str) -> Result<AccessFile, ConfigError> {
    use Seg::Key;
    let loc = Located::new(src, origin);
    let a: AccessFile = toml::from_str(src).map_err(|e| loc.toml_error(&e))?;
    let mut seen_ids = std::collections::BTreeSet::new();
    for (name, u) in &a.users {
        let base = [Key("users"), Key(name.as_str())];
        // The operator's own entry may narrow the operator (limits, tools,
        // agents), but it can never hold a token: a token would let a
        // remote client act as the operator.
        if let Some(why) = name.reserved()
            && !u.tokens.is_empty()
        {
            return Err(loc.at(
                &[base[0], base[1], Key("tokens")],
                format_args!(
                    "user `{name}` may not hold tokens: the name {why}. Remove the [[users.{name}.tokens]] entries from {origin} and create a user under another name for remote access"
                ),
            ));
        }
        if let Some(agents) = &u.agents {
            for (i, ag) in agents.iter().enumerate() {
                if !(ag == "*" || is_agent_name(ag)) {
                    return Err(loc.at(
                        &[base[0], base[1], Key("agents"), Seg::Idx(i)],
                        format_args!("{ag:?} is not an agent name or \"*\""),
                    ));
                }
            }
        }
        validate::tool_filter(&loc, &[base[0], base[1], Key("tools")], &u.tools)?;
        if let Some(caps) = &u.capabilities {
            validate::capabilities(&loc, &[base[0], base[1], Key("capabilities")], caps)?;
        }
        for (i, t) in u.tokens.iter().enumerate() {
            let at = |field| [base[0], base[1], Key("tokens"), Seg::Idx(i), Key(field)];
            let id_ok = !t.id.is_empty()
                && t.id.len() <= MAX_TOKEN_ID_LEN
                && t.id
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
            if !id_ok {
                return Err(loc.at(
                    &at("id"),
                    format_args!(
                        "must be 1-{MAX_TOKEN_ID_LEN} lowercase letters or digits (as `bulwark access create` writes it)"
                    ),
                ));
            }
            if !seen_ids.insert(t.id.as_str()) {
                return Err(loc.at(
                    &at("id"),
                    format_args!(
                        "token id {:?} appears twice; ids must be unique in the file (`bulwark access rotate` issues a new one)",
                        t.id
                    ),
                ));
            }
            let hash_ok = t.hash.len() == 64
                && t.hash
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hash_ok {
                return Err(loc.at(
                    &at("hash"),
                    "must be 64 lowercase hex digits (an HMAC-SHA256 written by `bulwark access`); never put a raw token here",
                ));
            }
        }
        if let Some(limits) = &u.limits {
            limits.validate().map_err(|(field, msg)| {
                loc.at(&[base[0], base[1], Key("limits"), Key(field)], msg)
            })?;
        }
    }
    Ok(a)
}

/// May `user` start a session with the agent of `manifest`? Admins may use
/// every agent; others need the agent's access mode to admit them and, when
/// their entry lists agents, the agent to be listed. `Err` says why not.
pub fn user_may_use_agent(
    manifest: &Manifest,
    user: &str,
    entry: &UserEntry,
) -> Result<(), String> {
    let agent = &manifest.agent.name;
    if entry.role == UserRole::Admin {
        return Ok(());
    }
    if let Some(list) = &entry.agents
        && !list.iter().any(|a| a == "*" || a == agent)
    {
        return Err(format!(
            "user {user:?} is not given agent {agent:?} in access.toml"
        ));
    }
    match manifest.access.mode {
        AccessMode::Public => Ok(()),
        AccessMode::Users if manifest.access.users.iter().any(|u| u == user) => Ok(()),
        AccessMode::Users => Err(format!(
            "agent {agent:?} admits only the users listed in its access.users"
        )),
        AccessMode::Private => Err(format!(
            "agent {agent:?} is private (access.mode = \"private\"): admins only"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    fn with_tokens(tokens: &str) -> String {
        format!("[users.alice]\nrole = \"user\"\n{tokens}")
    }

    #[test]
    fn tokens_and_limits_parse() {
        let src = with_tokens(&format!(
            "tokens = [{{ id = \"ab12\", hash = \"{HASH}\", created = 2026-01-02T03:04:05Z }}]\n[users.alice.limits]\nrequests_per_minute = 60\nmax_connections = 2\n"
        ));
        let a = parse_access(&src, "access.toml").unwrap();
        let alice = &a.users["alice"];
        assert_eq!(alice.tokens.len(), 1);
        assert_eq!(alice.tokens[0].id, "ab12");
        assert!(alice.tokens[0].created.is_some());
        assert_eq!(alice.limits.unwrap().max_connections, Some(2));
        // Absent means none, and the old schema still parses.
        let a = parse_access("[users.bob]\n", "access.toml").unwrap();
        assert!(a.users["bob"].tokens.is_empty() && a.users["bob"].limits.is_none());
    }

    #[test]
    fn bad_tokens_are_located() {
        for (bad, field) in [
            (
                format!("tokens = [{{ id = \"AB\", hash = \"{HASH}\" }}]\n"),
                "tokens[0].id",
            ),
            (
                "tokens = [{ id = \"ab\", hash = \"bwk_raw\" }]\n".to_string(),
                "tokens[0].hash",
            ),
            (
                format!(
                    "tokens = [{{ id = \"ab\", hash = \"{}\" }}]\n",
                    HASH.to_uppercase()
                ),
                "tokens[0].hash",
            ),
            (
                format!(
                    "tokens = [{{ id = \"ab\", hash = \"{HASH}\" }}, {{ id = \"ab\", hash = \"{HASH}\" }}]\n"
                ),
                "tokens[1].id",
            ),
            (
                format!("tokens = [{{ id = \"ab\", hash = \"{HASH}\", secret = \"x\" }}]\n"),
                "secret",
            ),
            (
                "[users.alice.limits]\nmax_connections = 0\n".to_string(),
                "limits.max_connections",
            ),
            ("[users.alice.limits]\nburst = 3\n".to_string(), "burst"),
        ] {
            let src = with_tokens(&bad);
            let e = parse_access(&src, "access.toml").unwrap_err();
            assert!(e.to_string().contains(field), "{field}: {e}");
            assert!(e.line >= 2, "{e}");
        }
        // Ids are unique across users too: one id finds one hash.
        let src = format!(
            "[users.a]\ntokens = [{{ id = \"x1\", hash = \"{HASH}\" }}]\n[users.b]\ntokens = [{{ id = \"x1\", hash = \"{HASH}\" }}]\n"
        );
        let e = parse_access(&src, "access.toml").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
    }

    #[test]
    fn credit_limits_parse_and_round_trip() {
        let src = "[users.alice.limits]\ncredits_per_session = 500\ncredits_per_day = 10000\ncredits_per_month = 9223372036854775807\n";
        let a = parse_access(src, "access.toml").unwrap();
        let limits = a.users["alice"].limits.unwrap();
        assert_eq!(limits.credits_per_session, Some(500));
        assert_eq!(limits.credits_per_day, Some(10_000));
        assert_eq!(limits.credits_per_month, Some(UserLimits::MAX_CREDITS));
        assert_eq!(limits.tokens_per_day, None);
        let written = toml::to_string(&a).unwrap();
        assert_eq!(parse_access(&written, "access.toml").unwrap(), a);
        // Absent limits are not written back as anything.
        let only_day =
            parse_access("[users.bob.limits]\ncredits_per_day = 7\n", "access.toml").unwrap();
        let written = toml::to_string(&only_day).unwrap();
        assert!(written.contains("credits_per_day = 7"), "{written}");
        assert!(!written.contains("credits_per_session"), "{written}");
        assert!(!written.contains("credits_per_month"), "{written}");
        assert_eq!(parse_access(&written, "access.toml").unwrap(), only_day);
    }

    #[test]
    fn too_large_credit_limits_are_refused() {
        // Past i64::MAX: TOML itself has no such integer, so the parse
        // fails at the value.
        for field in [
            "credits_per_session",
            "credits_per_day",
            "credits_per_month",
        ] {
            let src =
                format!("[users.alice]\n[users.alice.limits]\n{field} = 9223372036854775808\n");
            let e = parse_access(&src, "access.toml").unwrap_err();
            assert_eq!(e.line, 3, "{e}");
        }
        // Limits built in code can hold more; validate names the field.
        let limits = UserLimits {
            credits_per_month: Some(UserLimits::MAX_CREDITS + 1),
            ..Default::default()
        };
        let (field, msg) = limits.validate().unwrap_err();
        assert_eq!(field, "credits_per_month");
        assert!(msg.contains("at most 9223372036854775807"), "{msg}");
        let at_max = UserLimits {
            credits_per_session: Some(UserLimits::MAX_CREDITS),
            credits_per_day: Some(0),
            ..Default::default()
        };
        assert_eq!(at_max.validate(), Ok(()));
    }
}
