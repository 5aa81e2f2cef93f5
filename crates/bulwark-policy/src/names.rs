//! Agent and user names, validated once, when they are made.
//!
//! Both become directory names (`agents/<agent>`, `users/<user>/agents/<agent>`)
//! and the part after `agent:`/`user:` of ledger account ids, so they follow
//! one rule: 1-64 lowercase ASCII letters, digits, `-` or `_`, starting with a
//! letter or digit. A value of these types is therefore always a safe single
//! path component, and code that holds one never checks again. `Deserialize`
//! goes through the same check, so a manifest, access file or request with a
//! bad name fails where it is read, with the field named by the parser.

use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

/// The longest name, in bytes (all of them ASCII).
pub const MAX_NAME_LEN: usize = 64;

/// What the rule is, as every refusal says it.
pub const NAME_RULE: &str =
    "1-64 lowercase letters, digits, `-` or `_`, starting with a letter or digit";

/// Whether `name` follows the rule for agent and user names.
pub fn is_agent_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_LEN
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// A name that does not follow the rule. Shows the name quoted and escaped
/// (it may come from a model or a request and must not forge the rest of a
/// message or log line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} name {name:?} is invalid: use {NAME_RULE}")]
pub struct NameError {
    /// `agent` or `user`.
    pub kind: &'static str,
    /// The refused name, cut to a readable length.
    pub name: String,
}

impl NameError {
    fn new(kind: &'static str, name: &str) -> Self {
        let name = match name.char_indices().nth(MAX_NAME_LEN + 16) {
            Some((cut, _)) => format!("{}…", &name[..cut]),
            None => name.to_owned(),
        };
        Self { kind, name }
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $ty:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $ty(String);

        impl $ty {
            /// Checks `name` against the rule.
            pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
                let name = name.into();
                if is_agent_name(&name) {
                    Ok(Self(name))
                } else {
                    Err(NameError::new($kind, &name))
                }
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl TryFrom<String> for $ty {
            type Error = NameError;
            fn try_from(name: String) -> Result<Self, NameError> {
                Self::new(name)
            }
        }

        impl TryFrom<&str> for $ty {
            type Error = NameError;
            fn try_from(name: &str) -> Result<Self, NameError> {
                Self::new(name)
            }
        }

        impl From<$ty> for String {
            fn from(name: $ty) -> String {
                name.0
            }
        }

        impl FromStr for $ty {
            type Err = NameError;
            fn from_str(name: &str) -> Result<Self, NameError> {
                Self::new(name)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// Lets maps keyed by a name be looked up with a `&str` or
        /// `&String` (ordering and hashing are the string's own).
        impl Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<String> for $ty {
            fn borrow(&self) -> &String {
                &self.0
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

name_type!(
    /// The name of an agent: its directory under `agents/`, its manifest's
    /// `[agent] name`, its `agent:<name>` account.
    AgentName,
    "agent"
);

name_type!(
    /// The name of a user: its directory under `users/`, its access.toml
    /// entry, its `user:<name>` account. [`UserName::local`] is the CLI
    /// operator, a valid name that access.toml may not give a token
    /// ([`UserName::reserved`]).
    UserName,
    "user"
);

impl UserName {
    /// The local operator ([`crate::AccessFile::LOCAL_USER`]).
    pub fn local() -> Self {
        Self(crate::AccessFile::LOCAL_USER.to_owned())
    }

    /// Why this name may not hold a token (be created or rotated as a user
    /// of `serve`), or `None` if it may.
    pub fn reserved(&self) -> Option<&'static str> {
        crate::AccessFile::reserved_user_name(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::{Component, Path};

    #[test]
    fn the_rule_by_example() {
        for ok in ["a", "0", "helper", "my-agent_2", "a".repeat(64).as_str()] {
            assert!(AgentName::new(ok).is_ok(), "{ok}");
            assert!(UserName::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "A",
            "a.b",
            "a/b",
            "..",
            ".",
            "a b",
            "é",
            "a\0",
            "a\n",
            "a".repeat(65).as_str(),
        ] {
            let err = AgentName::new(bad).expect_err(bad);
            assert_eq!(err.kind, "agent");
            assert!(err.to_string().contains(NAME_RULE), "{err}");
        }
    }

    #[test]
    fn the_operator_is_a_valid_but_reserved_user() {
        let local = UserName::local();
        assert_eq!(local, "local");
        assert!(local.reserved().is_some());
        assert!(UserName::new("alice").is_ok_and(|u| u.reserved().is_none()));
    }

    #[test]
    fn deserializing_checks_and_names_the_field() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Doc {
            agent: AgentName,
        }
        let err = toml::from_str::<Doc>("agent = \"../etc\"").expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("agent") && text.contains(NAME_RULE), "{text}");
        let ok: Doc = toml::from_str("agent = \"helper\"").expect("accepted");
        assert_eq!(ok.agent.as_str(), "helper");
    }

    #[test]
    fn a_refused_name_is_shown_escaped_and_cut() {
        let err = UserName::new("a\nuser: admin").expect_err("refused");
        assert!(!err.to_string().contains('\n'), "{err}");
        let long = "x".repeat(10_000);
        let err = UserName::new(long).expect_err("refused");
        assert!(err.to_string().len() < 300, "{err}");
    }

    proptest! {
        #[test]
        fn every_accepted_name_is_one_safe_path_component(name in "\\PC{0,70}|[a-z0-9_.-]{0,70}") {
            if let Ok(agent) = AgentName::new(name.as_str()) {
                let mut parts = Path::new(agent.as_str()).components();
                prop_assert!(matches!(parts.next(), Some(Component::Normal(_))));
                prop_assert!(parts.next().is_none());
                prop_assert!(!agent.as_str().starts_with('.'));
                prop_assert!(agent.as_str().len() <= MAX_NAME_LEN);
                prop_assert!(agent.as_str().bytes().all(|b| b.is_ascii_graphic()));
            }
        }

        #[test]
        fn accepted_names_round_trip(name in "[a-z0-9][a-z0-9_-]{0,63}") {
            let agent = AgentName::new(name.as_str()).expect("valid by construction");
            let json = serde_json::to_string(&agent).expect("serializes");
            prop_assert_eq!(&json, &serde_json::to_string(&name).expect("string"));
            let back: AgentName = serde_json::from_str(&json).expect("round trip");
            prop_assert_eq!(&back, &agent);
            let user: UserName = name.parse().expect("FromStr");
            prop_assert_eq!(user.to_string(), name);
        }

        #[test]
        fn refused_names_fail_deserializing_with_the_rule(name in "\\PC{0,70}") {
            prop_assume!(!is_agent_name(&name));
            let json = serde_json::to_string(&name).expect("string");
            let err = serde_json::from_str::<UserName>(&json).expect_err("refused");
            prop_assert!(err.to_string().contains(NAME_RULE), "{}", err);
            prop_assert!(name.parse::<AgentName>().is_err());
        }
    }
}
