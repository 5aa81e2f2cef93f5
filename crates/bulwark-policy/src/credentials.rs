//! Credential grants (`[credentials.grants.<name>]` in a manifest): which
//! secret keys which tools may have injected, to which hosts, and where in
//! the request (`inject`). Also `[secrets]` of the global config: which
//! environment variables the runtime treats as secrets.
//!
//! Only names and templates live here, never a secret value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capability::HostPattern;
use crate::error::{ConfigError, Located, Seg};
use crate::manifest::{Manifest, is_agent_name};
use crate::template::{Template, TemplateError, is_key_name};
use crate::validate;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialsSection {
    #[serde(default)]
    pub grants: BTreeMap<String, CredentialGrant>,
}

/// Which secrets a tool may have injected at the boundary, and where to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialGrant {
    /// Names of keys in the secret store (`[A-Z_][A-Z0-9_]*`).
    pub keys: Vec<String>,
    /// Tool domains that may use them (at least one).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Host patterns they may be sent to (at least one; not `*`).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Where the network layer puts them. Empty = the keys are only usable
    /// through `${KEY}` placeholders a tool supplies.
    #[serde(default)]
    pub inject: Vec<Injection>,
    #[serde(default)]
    pub approval: Option<GrantApproval>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantApproval {
    /// Ask a human before each use.
    Required,
}

/// One injection: `{ header = "Authorization", value = "Bearer ${TOKEN}" }`
/// or `{ query = "key", value = "${MAPS_KEY}" }`. Exactly one of `header`
/// and `query` is set once the manifest has been validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Injection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// A [`Template`]: literal text and `${KEY}` placeholders naming keys of
    /// the same grant.
    pub value: String,
}

/// Where an [`Injection`] goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum InjectionTarget {
    /// A request header with this name (as written; compare
    /// case-insensitively).
    Header(String),
    /// A URL query parameter with this name.
    Query(String),
}

impl Injection {
    /// Where this injection goes. Meaningful after validation (exactly one
    /// of `header`/`query` set); on an unvalidated value `header` wins, and
    /// with neither set the result is `Header("")`, which is no valid
    /// header name and must be refused by the caller.
    pub fn target(&self) -> InjectionTarget {
        match (&self.header, &self.query) {
            (Some(h), _) => InjectionTarget::Header(h.clone()),
            (None, Some(q)) => InjectionTarget::Query(q.clone()),
            (None, None) => InjectionTarget::Header(String::new()),
        }
    }

    /// The parsed `value`. Cannot fail after validation.
    pub fn template(&self) -> Result<Template, TemplateError> {
        Template::parse(&self.value)
    }
}

/// How the runtime hands out credentials to an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialMode {
    /// The manifest declares grants: only they are honoured, each for its
    /// tools and hosts.
    Strict,
    /// The manifest declares no grants (pre-grant manifests): the runtime's
    /// legacy behaviour applies.
    Legacy,
}

impl Manifest {
    /// [`CredentialMode::Strict`] iff any grant is declared.
    pub fn credential_mode(&self) -> CredentialMode {
        if self.credentials.grants.is_empty() {
            CredentialMode::Legacy
        } else {
            CredentialMode::Strict
        }
    }
}

/// Headers an injection may not set: they frame the request or route it,
/// so a credential template must never control them.
pub const FORBIDDEN_INJECTION_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
];

/// Is `name` an HTTP token (RFC 9110 `tchar`s, at least one)?
pub fn is_http_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn check_header_name(name: &str) -> Result<(), String> {
    if !is_http_token(name) {
        return Err(format!(
            "{name:?} is not an HTTP header name: use letters, digits and !#$%&'*+-.^_`|~ only, e.g. \"Authorization\" or \"X-Api-Key\""
        ));
    }
    if FORBIDDEN_INJECTION_HEADERS
        .iter()
        .any(|f| f.eq_ignore_ascii_case(name))
    {
        return Err(format!(
            "header {name:?} frames or routes the request and cannot carry a credential: inject into a header such as \"Authorization\" or \"X-Api-Key\" instead"
        ));
    }
    Ok(())
}

fn check_query_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty: name the query parameter, e.g. query = \"key\"".into());
    }
    if name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || matches!(c, '&' | '=' | '#'))
    {
        return Err(format!(
            "{name:?} is not a query parameter name: remove '&', '=', '#', whitespace and control characters"
        ));
    }
    Ok(())
}

fn with<'a>(base: &[Seg<'a>], more: &[Seg<'a>]) -> Vec<Seg<'a>> {
    base.iter().chain(more).copied().collect()
}

/// Validate `[credentials]` of a manifest.
pub(crate) fn validate_credentials(
    loc: &Located<'_>,
    creds: &CredentialsSection,
) -> Result<(), ConfigError> {
    use Seg::Key;
    for (name, grant) in &creds.grants {
        let base = [Key("credentials"), Key("grants"), Key(name.as_str())];
        if !is_agent_name(name) {
            return Err(loc.at(
                &base,
                format_args!(
                    "{name:?} is not a valid grant name: use 1-64 characters [a-z0-9_-], starting with a letter or digit"
                ),
            ));
        }
        validate_grant(loc, &base, grant)?;
    }
    Ok(())
}

fn validate_grant(
    loc: &Located<'_>,
    base: &[Seg<'_>],
    grant: &CredentialGrant,
) -> Result<(), ConfigError> {
    use Seg::{Idx, Key};

    let keys_at = with(base, &[Key("keys")]);
    if grant.keys.is_empty() {
        return Err(loc.at(
            &keys_at,
            "must list at least one key name, e.g. keys = [\"GITHUB_TOKEN\"]",
        ));
    }
    key_names(loc, &keys_at, &grant.keys, "key")?;

    let tools_at = with(base, &[Key("tools")]);
    if grant.tools.is_empty() {
        return Err(loc.at(
            &tools_at,
            "must list at least one tool domain that may use these keys, e.g. tools = [\"web\"] (a grant no tool can use is a mistake)",
        ));
    }
    validate::domains(loc, &tools_at, &grant.tools, false)?;

    let hosts_at = with(base, &[Key("hosts")]);
    // A grant only for the shell passes keys into the command's environment
    // and sends nothing over the network itself.
    // The same holds for a stdio MCP server, which receives its keys in its
    // environment (an HTTP one is reached through hosts it lists itself).
    let shell_only = grant
        .tools
        .iter()
        .all(|t| t == "shell" || crate::mcp::is_mcp_domain(t));
    if grant.hosts.is_empty() && !shell_only {
        return Err(loc.at(
            &hosts_at,
            "must list at least one host the keys may be sent to, e.g. hosts = [\"api.github.com\"]",
        ));
    }
    validate::host_patterns(loc, &hosts_at, &grant.hosts)?;
    for (i, h) in grant.hosts.iter().enumerate() {
        if HostPattern::parse(h).is_ok_and(|p| p.is_any_host()) {
            return Err(loc.at(
                &with(&hosts_at, &[Idx(i)]),
                format_args!(
                    "{h:?} would send the credential to any host: name the hosts it is for, e.g. \"api.github.com\" or \"*.githubusercontent.com\""
                ),
            ));
        }
    }

    let mut targets: Vec<(usize, InjectionTarget)> = Vec::new();
    for (i, inj) in grant.inject.iter().enumerate() {
        let at = with(base, &[Key("inject"), Idx(i)]);
        let target = match (&inj.header, &inj.query) {
            (Some(_), Some(_)) => {
                return Err(loc.at(
                    &at,
                    "sets both `header` and `query`: an injection goes to one place; use two entries to send the value to both",
                ));
            }
            (None, None) => {
                return Err(loc.at(
                    &at,
                    "needs a destination: add header = \"Authorization\" (a request header) or query = \"key\" (a URL query parameter)",
                ));
            }
            (Some(h), None) => {
                check_header_name(h).map_err(|e| loc.at(&with(&at, &[Key("header")]), e))?;
                InjectionTarget::Header(h.to_ascii_lowercase())
            }
            (None, Some(q)) => {
                check_query_name(q).map_err(|e| loc.at(&with(&at, &[Key("query")]), e))?;
                InjectionTarget::Query(q.clone())
            }
        };
        if let Some((j, _)) = targets.iter().find(|(_, t)| *t == target) {
            let what = match &target {
                InjectionTarget::Header(_) => "header",
                InjectionTarget::Query(_) => "query",
            };
            return Err(loc.at(
                &with(&at, &[Key(what)]),
                format_args!(
                    "this {what} is already injected by inject[{j}]: keep one entry per destination"
                ),
            ));
        }
        targets.push((i, target));

        let value_at = with(&at, &[Key("value")]);
        let template = inj.template().map_err(|e| loc.at(&value_at, e))?;
        if !template.has_keys() {
            // The value is not echoed: a literal here is likely a pasted secret.
            return Err(loc.at(
                &value_at,
                format_args!(
                    "has no ${{KEY}} placeholder: write the secret as a placeholder naming one of this grant's keys, e.g. \"Bearer ${{{}}}\", and keep secret values out of the manifest",
                    grant.keys.first().map_or("KEY", String::as_str)
                ),
            ));
        }
        if let Some(k) = template.keys().find(|k| !grant.keys.iter().any(|g| g == k)) {
            return Err(loc.at(
                &value_at,
                format_args!(
                    "placeholder ${{{k}}} is not a key of this grant: add {k:?} to keys, or use one of {:?}",
                    grant.keys
                ),
            ));
        }
    }
    Ok(())
}

/// A list of key names: each `[A-Z_][A-Z0-9_]{0,127}`, no duplicates.
pub(crate) fn key_names(
    loc: &Located<'_>,
    at: &[Seg<'_>],
    names: &[String],
    what: &str,
) -> Result<(), ConfigError> {
    for (i, k) in names.iter().enumerate() {
        let here = with(at, &[Seg::Idx(i)]);
        if !is_key_name(k) {
            return Err(loc.at(
                &here,
                format_args!(
                    "{k:?} is not a {what} name: use [A-Z_][A-Z0-9_]*, uppercase like an environment variable (e.g. \"GITHUB_TOKEN\"), at most 128 characters"
                ),
            ));
        }
        if let Some(j) = names[..i].iter().position(|p| p == k) {
            return Err(loc.at(
                &here,
                format_args!("{k:?} is listed twice (also at [{j}]): remove one"),
            ));
        }
    }
    Ok(())
}

/// `[secrets]` of the global config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsSection {
    /// Environment variables the runtime treats as secrets (same name rule
    /// as grant keys).
    #[serde(default)]
    pub env: Vec<String>,
}

pub(crate) fn validate_secrets(
    loc: &Located<'_>,
    secrets: &SecretsSection,
) -> Result<(), ConfigError> {
    key_names(
        loc,
        &[Seg::Key("secrets"), Seg::Key("env")],
        &secrets.env,
        "secret environment variable",
    )
}
