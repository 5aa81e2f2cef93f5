//! Users and their restrictions (`$BULWARK_HOME/access.toml`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capability::Capability;
use crate::error::{ConfigError, Located, Seg};
use crate::manifest::{AccessMode, Manifest, ToolFilter, is_agent_name};
use crate::validate;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessFile {
    #[serde(default)]
    pub users: BTreeMap<String, UserEntry>,
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
    for (name, u) in &a.users {
        let base = [Key("users"), Key(name.as_str())];
        // User names become directory names under users/, so they follow
        // the same rule as agent names.
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            && !name.starts_with(['-', '_']);
        if !valid {
            return Err(loc.at(
                &base,
                "user name must be 1-64 lowercase letters, digits, `-` or `_`, starting with a letter or digit",
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
