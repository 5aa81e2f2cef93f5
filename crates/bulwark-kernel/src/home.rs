//! `$BULWARK_HOME`: where configuration, agents, the database and every
//! per-user, per-agent directory live.
//!
//! Workspace and memory roots are separate sibling directories built from
//! validated names, never string prefixes of one another, so `bob` can never
//! reach `bobby` and an agent's workspace never contains its memory.

use crate::agent::KernelError;
use bulwark_policy::{
    AccessFile, AgentName, GlobalConfig, Manifest, UserName, parse_access, parse_global_config,
    parse_manifest,
};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

/// An agent read from `agents/<name>/`.
#[derive(Debug, Clone)]
pub struct LoadedAgent {
    pub manifest: Manifest,
    pub system_prompt: String,
    pub dir: PathBuf,
    /// SHA-256 of exactly the bytes parsed: `agent.toml`, and `SYSTEM.md`
    /// when it exists. A signature check compares these with the signed
    /// listing, so a file swapped between the check and the load is caught.
    pub sources: Vec<(String, [u8; 32])>,
}

fn sha256(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// The system prompt of an agent without `SYSTEM.md` (also for a caller
/// that builds a [`LoadedAgent`] from bytes it has verified).
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a careful assistant. Use the tools you are given \
to do the task, and say plainly when a tool is refused.";

/// `agent` as an [`AgentName`], or the setup error that says the rule.
fn agent_name(agent: &str) -> Result<AgentName, KernelError> {
    AgentName::new(agent).map_err(|e| KernelError::Setup(e.to_string()))
}

/// `user` as a [`UserName`], or the setup error that says the rule.
fn user_name(user: &str) -> Result<UserName, KernelError> {
    UserName::new(user).map_err(|e| KernelError::Setup(e.to_string()))
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `$BULWARK_HOME`, else `$XDG_DATA_HOME/bulwark`, else `~/.local/share/bulwark`.
    pub fn from_env() -> Result<Self, KernelError> {
        if let Some(home) = std::env::var_os("BULWARK_HOME").filter(|v| !v.is_empty()) {
            return Ok(Self::new(PathBuf::from(home)));
        }
        if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
            return Ok(Self::new(PathBuf::from(xdg).join("bulwark")));
        }
        match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => Ok(Self::new(PathBuf::from(home).join(".local/share/bulwark"))),
            None => Err(KernelError::Setup(
                "cannot find a data directory: set BULWARK_HOME".into(),
            )),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    pub fn access_path(&self) -> PathBuf {
        self.root.join("access.toml")
    }
    pub fn db_path(&self) -> PathBuf {
        self.root.join("bulwark.db")
    }
    pub fn agents_dir(&self) -> PathBuf {
        self.root.join("agents")
    }
    /// `agents/<agent>`; the `&str` forms check the name, the typed ones
    /// ([`Home::agent_path`], ...) cannot fail.
    pub fn agent_dir(&self, agent: &str) -> Result<PathBuf, KernelError> {
        Ok(self.agent_path(&agent_name(agent)?))
    }
    /// `users/<user>/agents/<agent>/workspace`
    pub fn workspace_dir(&self, user: &str, agent: &str) -> Result<PathBuf, KernelError> {
        let agent = agent_name(agent)?;
        Ok(self.workspace_path(&user_name(user)?, &agent))
    }
    /// `users/<user>/agents/<agent>/memory`
    pub fn agent_memory_dir(&self, user: &str, agent: &str) -> Result<PathBuf, KernelError> {
        let agent = agent_name(agent)?;
        Ok(self.agent_memory_path(&user_name(user)?, &agent))
    }
    /// `users/<user>/agents/<agent>/cache/kv`: the local driver's cache of
    /// the system turn's KV state (warm starts). Per user and agent, beside
    /// (never inside) the workspace: a served worker may write it, and one
    /// user's worker must not be able to plant state another user's model
    /// then runs on.
    pub fn kv_cache_dir(&self, user: &str, agent: &str) -> Result<PathBuf, KernelError> {
        let agent = agent_name(agent)?;
        let workspace = self.workspace_path(&user_name(user)?, &agent);
        let data = workspace
            .parent()
            .ok_or_else(|| KernelError::Setup("the workspace directory has no parent".into()))?;
        Ok(data.join("cache").join("kv"))
    }
    /// `users/<user>/memory`, shared by the user's agents.
    pub fn user_memory_dir(&self, user: &str) -> Result<PathBuf, KernelError> {
        Ok(self.user_memory_path(&user_name(user)?))
    }

    /// `agents/<agent>`: a name is one safe path component by construction.
    pub fn agent_path(&self, agent: &AgentName) -> PathBuf {
        self.agents_dir().join(agent.as_str())
    }
    fn user_path(&self, user: &UserName) -> PathBuf {
        self.root.join("users").join(user.as_str())
    }
    /// `users/<user>/agents/<agent>/workspace`
    pub fn workspace_path(&self, user: &UserName, agent: &AgentName) -> PathBuf {
        self.user_path(user)
            .join("agents")
            .join(agent.as_str())
            .join("workspace")
    }
    /// `users/<user>/agents/<agent>/memory`
    pub fn agent_memory_path(&self, user: &UserName, agent: &AgentName) -> PathBuf {
        self.user_path(user)
            .join("agents")
            .join(agent.as_str())
            .join("memory")
    }
    /// `users/<user>/memory`, shared by the user's agents.
    pub fn user_memory_path(&self, user: &UserName) -> PathBuf {
        self.user_path(user).join("memory")
    }

    fn read_optional(path: &Path) -> Result<Option<String>, KernelError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(KernelError::Setup(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    /// `config.toml`; absent means every default.
    pub fn load_global(&self) -> Result<GlobalConfig, KernelError> {
        Ok(self.load_global_digested()?.0)
    }

    /// [`load_global`](Self::load_global), with the SHA-256 of the bytes
    /// parsed (`None`: no file, the defaults) for the audit record of
    /// what a run was configured with.
    pub fn load_global_digested(&self) -> Result<(GlobalConfig, Option<[u8; 32]>), KernelError> {
        let path = self.config_path();
        match Self::read_optional(&path)? {
            Some(src) => parse_global_config(&src, &path.display().to_string())
                .map(|config| (config, Some(sha256(&src))))
                .map_err(|e| KernelError::Setup(e.to_string())),
            None => Ok((GlobalConfig::default(), None)),
        }
    }

    /// `access.toml`; absent means no users with restrictions.
    pub fn load_access(&self) -> Result<AccessFile, KernelError> {
        Ok(self.load_access_digested()?.0)
    }

    /// [`load_access`](Self::load_access), with the SHA-256 of the bytes
    /// parsed (`None`: no file).
    pub fn load_access_digested(&self) -> Result<(AccessFile, Option<[u8; 32]>), KernelError> {
        let path = self.access_path();
        match Self::read_optional(&path)? {
            Some(src) => parse_access(&src, &path.display().to_string())
                .map(|access| (access, Some(sha256(&src))))
                .map_err(|e| KernelError::Setup(e.to_string())),
            None => Ok((AccessFile::default(), None)),
        }
    }

    pub fn load_agent(&self, name: &str) -> Result<LoadedAgent, KernelError> {
        let dir = self.agent_dir(name)?;
        let manifest_path = dir.join("agent.toml");
        let src = Self::read_optional(&manifest_path)?.ok_or_else(|| {
            KernelError::Setup(format!(
                "no agent `{name}`: {} does not exist (see `bulwark agents list`, or `bulwark init` for an example)",
                manifest_path.display()
            ))
        })?;
        let manifest = parse_manifest(&src, &manifest_path.display().to_string())
            .map_err(|e| KernelError::Setup(e.to_string()))?;
        if manifest.agent.name != name {
            return Err(KernelError::Setup(format!(
                "{}: [agent] name is `{}` but the directory is `{name}`; they must match",
                manifest_path.display(),
                manifest.agent.name
            )));
        }
        let mut sources = vec![("agent.toml".to_string(), sha256(&src))];
        let system_prompt = match Self::read_optional(&dir.join("SYSTEM.md"))? {
            Some(text) => {
                sources.push(("SYSTEM.md".to_string(), sha256(&text)));
                text
            }
            None => DEFAULT_SYSTEM_PROMPT.to_string(),
        };
        Ok(LoadedAgent {
            manifest,
            system_prompt,
            dir,
            sources,
        })
    }

    /// Agent directory names that hold an `agent.toml`, sorted.
    pub fn list_agents(&self) -> Result<Vec<String>, KernelError> {
        let dir = self.agents_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(KernelError::Setup(format!(
                    "cannot list {}: {e}",
                    dir.display()
                )));
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("agent.toml").is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_roots_are_not_prefixes_of_each_other() {
        let home = Home::new("/h");
        let bob = home.workspace_dir("bob", "a").unwrap();
        let bobby = home.workspace_dir("bobby", "a").unwrap();
        assert!(!bobby.starts_with(&bob));
        let mem = home.agent_memory_dir("bob", "a").unwrap();
        assert!(!mem.starts_with(&bob) && !bob.starts_with(&mem));
        assert!(!home.user_memory_dir("bob").unwrap().starts_with(&bob));
    }

    #[test]
    fn names_that_could_be_paths_are_refused() {
        let home = Home::new("/h");
        for bad in ["..", "a/b", "", "A", "-x", "a b", "x\0"] {
            assert!(home.workspace_dir(bad, "a").is_err(), "{bad:?}");
            assert!(home.agent_dir(bad).is_err(), "{bad:?}");
        }
    }
}
