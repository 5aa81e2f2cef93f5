//! The process environment as it was at start-up, captured once.
//!
//! Secrets (API keys, credential keys) arrive as environment variables. The
//! binary captures the environment first thing, then removes everything but
//! a few harmless variables from its own environment, so nothing it spawns
//! and nothing that inspects `/proc/<pid>/environ` later finds them. Every
//! reader of a secret goes through this snapshot; values are held in
//! `SecretString` (zeroized on drop, redacted in `Debug`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use secrecy::{ExposeSecret, SecretString};

/// Variables that stay in the process environment after the scrub: they
/// locate files and set the terminal, and carry no credentials.
pub const KEPT_VARIABLES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "NO_COLOR",
    "COLUMNS",
    "BULWARK_HOME",
    "BULWARK_LOG",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "RUST_BACKTRACE",
];

pub struct Environment {
    vars: BTreeMap<String, SecretString>,
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

static SNAPSHOT: OnceLock<Environment> = OnceLock::new();

/// The start-up environment. The first call captures it; call it before
/// anything modifies the environment.
pub fn environment() -> &'static Environment {
    SNAPSHOT.get_or_init(|| Environment {
        vars: std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .map(|(k, v)| (k, SecretString::from(v)))
            .collect(),
    })
}

impl Environment {
    /// The value of `name`, if set and non-empty.
    pub fn get(&self, name: &str) -> Option<&SecretString> {
        self.vars
            .get(name)
            .filter(|v| !v.expose_secret().is_empty())
    }

    pub fn is_set(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Names that the scrub removes from the live environment.
    pub fn names_to_scrub(&self) -> Vec<&str> {
        self.vars
            .keys()
            .map(String::as_str)
            .filter(|k| !KEPT_VARIABLES.contains(k))
            .collect()
    }
}
