//! The environment a worker starts with: built from an allowlist, never
//! inherited.
//!
//! The server process holds every provider key and token; a worker needs
//! only a few locating variables and the keys its agent may use. The child
//! is started with `env_clear()` and exactly [`WorkerEnv::vars`]: `PATH`,
//! `HOME`, `LANG`, `BULWARK_HOME`, and variables named explicitly in the
//! configuration. Names that change how a process loads code or starts a
//! runtime (loader injection, `NODE_OPTIONS`-style option variables,
//! debugger and inspector hooks) and Bulwark's own configuration variables
//! are refused even when named, so a configuration mistake cannot open
//! them up.

use secrecy::{ExposeSecret, SecretString};
use std::ffi::OsString;
use std::path::Path;

/// Used when the supervisor's own `PATH` is unset.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Used when the supervisor's own `LANG` is unset.
const DEFAULT_LANG: &str = "C.UTF-8";

/// Variables the supervisor sets itself; naming them again is an error.
const FIXED: &[&str] = &["PATH", "HOME", "LANG", "BULWARK_HOME", "BULWARK_LOG"];

/// Exact names that are never passed.
const FORBIDDEN: &[&str] = &[
    "NODE_OPTIONS",
    "NODE_INSPECT",
    "NODE_DEBUG",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONINSPECT",
    "PYTHONBREAKPOINT",
    "PERL5OPT",
    "PERL5LIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "BASH_ENV",
    "ENV",
    "GLIBC_TUNABLES",
    "GCONV_PATH",
    "HOSTALIASES",
    "RES_OPTIONS",
    "LOCALDOMAIN",
    "IFS",
    "PS4",
    "SHELLOPTS",
];

/// Name prefixes that are never passed: the dynamic loader (`LD_`,
/// `DYLD_`), allocator and sanitizer hooks, and Bulwark's own settings
/// (`BULWARK_HOME` is set by the supervisor; nothing else may be).
const FORBIDDEN_PREFIXES: &[&str] = &[
    "LD_", "DYLD_", "MALLOC_", "ASAN_", "LSAN_", "UBSAN_", "TSAN_", "BULWARK_",
];

/// Name suffixes of runtime option and debugger variables
/// (`NODE_OPTIONS`, `DOTNET_*_OPTS`, `..._INSPECT`...).
const FORBIDDEN_SUFFIXES: &[&str] = &["_OPTIONS", "_OPTS", "_INSPECT", "_DEBUGGER"];

/// A variable name the configuration may not pass to workers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error(
        "`{0}` is not a valid environment variable name (letters, digits and `_`, not starting with a digit)"
    )]
    InvalidName(String),
    #[error("`{0}` is set by the supervisor itself")]
    Fixed(String),
    #[error("`{0}` may not be passed to a worker: it changes how a process loads or runs code")]
    Forbidden(String),
    #[error("`{0}` is named twice")]
    Duplicate(String),
}

/// The allowlisted environment of every worker (see the module docs).
#[derive(Clone)]
pub struct WorkerEnv {
    path: String,
    home: Option<OsString>,
    lang: String,
    log: Option<String>,
    extra: Vec<(String, SecretString)>,
}

impl std::fmt::Debug for WorkerEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: values may be keys.
        f.debug_struct("WorkerEnv")
            .field("path", &self.path)
            .field("lang", &self.lang)
            .field("log", &self.log)
            .field(
                "extra",
                &self.extra.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl WorkerEnv {
    /// `PATH`, `HOME` and `LANG` as the current process has them (defaults
    /// for `PATH` and `LANG` when unset); nothing else.
    pub fn from_process() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            path: var("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
            home: std::env::var_os("HOME").filter(|v| !v.is_empty()),
            lang: var("LANG").unwrap_or_else(|| DEFAULT_LANG.into()),
            log: None,
            extra: Vec::new(),
        }
    }

    /// Passes `BULWARK_LOG` (a log filter: no secrets) so workers log at
    /// the level the server does.
    pub fn with_log_filter(mut self, filter: impl Into<String>) -> Self {
        self.log = Some(filter.into());
        self
    }

    /// Passes one more variable, typically a provider key the server read
    /// at start-up (its own environment has been scrubbed since).
    pub fn with_var(mut self, name: &str, value: SecretString) -> Result<Self, EnvError> {
        check_name(name)?;
        if self.extra.iter().any(|(k, _)| k == name) {
            return Err(EnvError::Duplicate(name.into()));
        }
        self.extra.push((name.into(), value));
        Ok(self)
    }

    /// The names that will be set (for logs and health output).
    pub fn names(&self) -> Vec<&str> {
        let mut names = vec!["PATH", "LANG", "BULWARK_HOME"];
        if self.home.is_some() {
            names.push("HOME");
        }
        if self.log.is_some() {
            names.push("BULWARK_LOG");
        }
        names.extend(self.extra.iter().map(|(k, _)| k.as_str()));
        names
    }

    /// The complete environment of a worker whose data directory is
    /// `bulwark_home`. Values of passed variables are exposed here, at the
    /// spawn, and nowhere else.
    pub fn vars(&self, bulwark_home: &Path) -> Vec<(OsString, OsString)> {
        let mut vars: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), self.path.clone().into()),
            ("LANG".into(), self.lang.clone().into()),
            ("BULWARK_HOME".into(), bulwark_home.as_os_str().to_owned()),
        ];
        if let Some(home) = &self.home {
            vars.push(("HOME".into(), home.clone()));
        }
        if let Some(log) = &self.log {
            vars.push(("BULWARK_LOG".into(), log.clone().into()));
        }
        for (name, value) in &self.extra {
            vars.push((name.into(), value.expose_secret().into()));
        }
        vars
    }
}

/// Refuses names that are malformed, fixed, or forbidden (module docs).
pub fn check_name(name: &str) -> Result<(), EnvError> {
    let mut chars = name.chars();
    let well_formed = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed || name.len() > 128 {
        return Err(EnvError::InvalidName(name.into()));
    }
    if FIXED.contains(&name) {
        return Err(EnvError::Fixed(name.into()));
    }
    let upper = name.to_ascii_uppercase();
    let forbidden = FORBIDDEN.contains(&upper.as_str())
        || FORBIDDEN_PREFIXES.iter().any(|p| upper.starts_with(p))
        || FORBIDDEN_SUFFIXES.iter().any(|s| upper.ends_with(s));
    if forbidden {
        return Err(EnvError::Forbidden(name.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_keys_pass_and_injection_variables_do_not() {
        for ok in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "my_provider_key"] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "ld_preload",
            "NODE_OPTIONS",
            "JAVA_TOOL_OPTIONS",
            "DOTNET_STARTUP_OPTS",
            "PYTHONSTARTUP",
            "BULWARK_SANDBOX_SPEC",
            "GLIBC_TUNABLES",
        ] {
            assert!(
                matches!(check_name(bad), Err(EnvError::Forbidden(_))),
                "{bad}"
            );
        }
        for fixed in ["PATH", "HOME", "BULWARK_HOME"] {
            assert!(matches!(check_name(fixed), Err(EnvError::Fixed(_))));
        }
        for invalid in ["", "1ABC", "A=B", "A B", "A\0B"] {
            assert!(matches!(check_name(invalid), Err(EnvError::InvalidName(_))));
        }
    }

    #[test]
    fn debug_output_has_names_not_values() {
        let env = WorkerEnv::from_process()
            .with_var("PROVIDER_KEY", SecretString::from("sk-very-secret"))
            .unwrap();
        let shown = format!("{env:?}");
        assert!(shown.contains("PROVIDER_KEY"));
        assert!(!shown.contains("sk-very-secret"));
    }
}
