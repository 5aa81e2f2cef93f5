//! A `bulwark worker` confines itself to its own user's and agent's data
//! before it does anything else.
//!
//! A worker runs one user's conversation: model output, tool calls and
//! provider responses all pass through it. Its tools are confined already
//! (the workspace by handle, shell commands by the sandbox helper); this
//! confines the worker process itself, so that a bug anywhere in it cannot
//! reach the server's keys (`keys/`: the token HMAC secret, the audit
//! signing key), another user's directories, or another agent's files.
//!
//! The rule set is [`worker_rules`], a pure function of the home, the user,
//! the agent and the resolved model file. [`confine_worker`] prepares what
//! must exist beforehand (the user's directories, the database files),
//! applies it with `no_new_privs` and Landlock, and decides, per
//! `[sandbox] enforcement`, what happens when that fails: strict refuses
//! to serve (the client gets a setup error), permissive warns and goes on.
//!
//! It runs in [`crate::run_main`] before the async runtime exists:
//! Landlock binds the calling thread and the threads started after it,
//! never earlier ones.

use crate::error::chain;
use bulwark_kernel::{Home, KernelError};
use bulwark_policy::{AgentName, GlobalConfig, SandboxEnforcement, UserName, parse_model_ref};
use bulwark_sandbox::SelfConfinement;
use std::path::{Path, PathBuf};

/// The arguments of the hidden `bulwark worker` subcommand. The supervisor
/// passes the user and agent of the conversation so the worker can confine
/// itself to them before it reads its first command.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    /// The user the conversation belongs to (authenticated by the server).
    #[arg(long, value_parser = parse_user)]
    pub user: String,
    /// The agent of the conversation.
    #[arg(long, value_parser = parse_agent)]
    pub agent: String,
}

/// An `--agent` argument, checked as an [`AgentName`].
fn parse_agent(name: &str) -> Result<String, String> {
    AgentName::new(name)
        .map(String::from)
        .map_err(|e| e.to_string())
}

/// A `--user` argument, checked as a [`UserName`].
fn parse_user(name: &str) -> Result<String, String> {
    UserName::new(name)
        .map(String::from)
        .map_err(|e| e.to_string())
}

/// What the worker knows when its runtime starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerStart {
    pub user: String,
    pub agent: String,
    /// Set when the worker must not serve: confinement failed under strict
    /// enforcement. The worker answers `Start` with a setup error for this
    /// reason (the client gets a reference to it, the server log the text).
    pub refusal: Option<String>,
}

/// What a worker for `user` and `agent` may reach, besides the system
/// baseline of [`bulwark_sandbox::confine_current_process`]:
///
/// * read only: `config.toml`, `access.toml`, `audit.ack` (an operator's
///   acknowledgement of a log problem), `trust/` (public verifier keys;
///   every run computes its agent's signature status), `agents/<agent>/`,
///   and `model_file` when it may be granted (see below);
/// * read + execute: `exe`, the bulwark binary, which the shell tool runs
///   again as its sandbox helper;
/// * read-write: `users/<user>/agents/<agent>/` (workspace, agent memory)
///   and `users/<user>/memory/` (shared by the user's agents); the local
///   model's KV cache (`cache/kv/`, warm starts) is inside the former;
/// * and what its sandboxed shell commands need (their pids cgroup, their
///   namespaces prepared beforehand).
///
/// Never: `keys/`, the database (the server performs the worker's store
/// operations for it), other users' directories, other agents'
/// directories, anything else in the data directory. A local model inside the data
/// directory is granted only under `models/` (or inside the agent's own
/// directory, granted anyway); elsewhere on the machine the one file is
/// granted. `model_file` should be canonical (no `..`, no links), as
/// [`local_model_file`] returns it.
pub fn worker_rules(
    home: &Home,
    user: &str,
    agent: &str,
    model_file: Option<&Path>,
    exe: Option<&Path>,
) -> Result<SelfConfinement, KernelError> {
    let root = home.root();
    let agent_dir = home.agent_dir(agent)?;
    let agent_data = home
        .workspace_dir(user, agent)?
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| KernelError::Setup("the workspace directory has no parent".into()))?;
    let mut read_only = vec![
        home.config_path(),
        home.access_path(),
        root.join("audit.ack"),
        root.join(bulwark_trust::TRUST_DIR),
        agent_dir.clone(),
    ];
    if let Some(model) = model_file {
        let in_home = model.starts_with(root);
        let allowed =
            !in_home || model.starts_with(root.join("models")) || model.starts_with(&agent_dir);
        if allowed && !model.starts_with(&agent_dir) {
            read_only.push(model.to_path_buf());
        }
    }
    let read_write_dirs = vec![agent_data, home.user_memory_dir(user)?];
    Ok(SelfConfinement {
        read_only,
        read_exec: exe.map(Path::to_path_buf).into_iter().collect(),
        read_write_dirs,
        read_write_files: Vec::new(),
        sandboxed_children: true,
    })
}

/// What the agent's MCP servers need beyond the worker's own rules: its
/// pin file (read at session open), and each stdio server's `read_only`
/// directories and an absolute program path (the server runs in a sandbox
/// nested in the worker's Landlock domain, which can only narrow). From the
/// manifest and the config.toml entries it names; a manifest that does not
/// load adds nothing (the session setup reports it).
pub fn mcp_paths(home: &Home, global: &GlobalConfig, agent: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let pins = bulwark_mcp::pins::pin_path(home.root(), agent);
    // Landlock rules need an existing path; no pin file, nothing to read.
    let read_only: Vec<PathBuf> = Some(pins).filter(|p| p.exists()).into_iter().collect();
    let mut read_exec = Vec::new();
    let Ok(loaded) = home.load_agent(agent) else {
        return (read_only, read_exec);
    };
    for (name, entry) in &loaded.manifest.mcp.servers {
        let defined = match (&entry.command, &entry.url) {
            (None, None) => global.mcp.servers.get(name),
            _ => Some(entry),
        };
        let Some(defined) = defined else { continue };
        read_exec.extend(defined.read_only.iter().cloned());
        if let Some(program) = defined.command.as_ref().and_then(|c| c.first()) {
            let program = Path::new(program);
            if program.is_absolute() {
                read_exec.push(program.to_path_buf());
            }
        }
    }
    (read_only, read_exec)
}

/// The file a `local:` model of `agent` loads, canonical, when it is one
/// (`None` for providers over the network and for `script:`, whose files
/// live in the agent's directory). Mirrors how the kernel resolves it: a
/// catalogue name is `models/<file>`; anything with a `/` or ending in
/// `.gguf` is a path relative to the agent directory.
pub fn local_model_file(home: &Home, global: &GlobalConfig, agent: &str) -> Option<PathBuf> {
    let loaded = home.load_agent(agent).ok()?;
    let model = loaded
        .manifest
        .agent
        .model
        .clone()
        .or_else(|| bulwark_kernel::default_model(global))?;
    let model_ref = parse_model_ref(&model).ok()?;
    if model_ref.provider != "local" || global.providers.contains_key("local") {
        return None;
    }
    let spec = model_ref.model;
    let path = match bulwark_kernel::model_catalogue()
        .ok()
        .and_then(|c| c.get(&spec).map(|entry| entry.file.clone()))
    {
        Some(file) => bulwark_models::models_dir(home.root()).join(file),
        None => loaded.dir.join(&spec),
    };
    std::fs::canonicalize(path).ok()
}

/// Creates what must exist before the rules are made: the user's
/// directories for the agent (a rule is on an existing directory; a
/// missing one would stay unreachable).
fn prepare_paths(home: &Home, user: &str, agent: &str) -> Result<(), String> {
    let text = |err: &dyn std::error::Error| chain(err);
    // Only for an agent that exists: a request naming another must not
    // leave directories behind (the session setup refuses it anyway).
    if home
        .agent_dir(agent)
        .map_err(|e| text(&e))?
        .join("agent.toml")
        .is_file()
    {
        let workspace = home.workspace_dir(user, agent).map_err(|e| text(&e))?;
        std::fs::create_dir_all(workspace).map_err(|e| text(&e))?;
        let memory = home.user_memory_dir(user).map_err(|e| text(&e))?;
        std::fs::create_dir_all(memory).map_err(|e| text(&e))?;
    }
    Ok(())
}

/// The local driver's KV cache directory, owner-only, so that its rule
/// can be made (the driver would create it, but only after confinement).
fn prepare_kv_cache(home: &Home, user: &str, agent: &str) -> Result<(), String> {
    let dir = home
        .kv_cache_dir(user, agent)
        .map_err(|e| format!("the local model cache directory: {e}"))?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(&dir)
        .map_err(|e| format!("the local model cache directory is not ready for a worker: {e}"))
}

/// Confines this worker to `args.user` and `args.agent` (see the module
/// docs) and says on stderr what is in force; the supervisor logs it.
/// Names no paths: a log is no place for where the secrets are.
///
/// Must be called while the process has one thread.
pub fn confine_worker(home: &Home, args: &WorkerArgs) -> WorkerStart {
    let start = |refusal| WorkerStart {
        user: args.user.clone(),
        agent: args.agent.clone(),
        refusal,
    };
    // A config that does not load is reported when the session is set up;
    // confinement meanwhile takes the strict default.
    let global = home.load_global().unwrap_or_default();
    let strict = global.sandbox.enforcement == SandboxEnforcement::Strict;
    // Rules compare paths: use the home as the kernel sees it.
    let home = std::fs::canonicalize(home.root())
        .map(Home::new)
        .unwrap_or_else(|_| home.clone());
    let confined = prepare_paths(&home, &args.user, &args.agent)
        .map_err(|e| format!("the data directory is not ready for a worker: {e}"))
        .and_then(|()| {
            let model = local_model_file(&home, &global, &args.agent);
            if model.is_some() {
                prepare_kv_cache(&home, &args.user, &args.agent)?;
            }
            let exe = std::env::current_exe().ok();
            worker_rules(
                &home,
                &args.user,
                &args.agent,
                model.as_deref(),
                exe.as_deref(),
            )
            .map(|mut rules| {
                let (read_only, read_exec) = mcp_paths(&home, &global, &args.agent);
                rules.read_only.extend(read_only);
                rules.read_exec.extend(read_exec);
                rules
            })
            .map_err(|e| e.to_string())
        })
        .and_then(|rules| bulwark_sandbox::confine_current_process(&rules).map_err(|e| chain(&e)));
    match confined {
        Ok(report) => {
            eprintln!(
                "bulwark worker: confinement in force for user `{}`, agent `{}`: {report}",
                args.user, args.agent
            );
            start(None)
        }
        Err(err) => start(decide(strict, &err)),
    }
}

/// Strict: the reason to refuse every `Start` (also printed for the
/// server log). Permissive: a warning, and no refusal.
fn decide(strict: bool, why: &str) -> Option<String> {
    if strict {
        let refusal = format!(
            "this server cannot confine its worker process: {why}. [sandbox] enforcement is \
             \"strict\" in config.toml, so no conversation runs unconfined; fix the cause, or \
             set enforcement = \"permissive\" to run without it"
        );
        eprintln!("bulwark worker: refusing to serve: {refusal}");
        Some(refusal)
    } else {
        eprintln!(
            "bulwark worker: WARNING: running unconfined ([sandbox] enforcement = \
             \"permissive\"): {why}"
        );
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_for(user: &str, agent: &str, model: Option<&Path>) -> SelfConfinement {
        let home = Home::new("/srv/bw");
        worker_rules(
            &home,
            user,
            agent,
            model,
            Some(Path::new("/usr/bin/bulwark")),
        )
        .expect("valid names")
    }

    fn all_paths(rules: &SelfConfinement) -> Vec<&Path> {
        rules
            .read_only
            .iter()
            .chain(&rules.read_exec)
            .chain(&rules.read_write_dirs)
            .chain(&rules.read_write_files)
            .map(PathBuf::as_path)
            .collect()
    }

    #[test]
    fn alice_gets_her_own_directories_and_nothing_of_bob_or_the_keys() {
        let rules = rules_for("alice", "helper", None);
        let root = Path::new("/srv/bw");
        assert_eq!(
            rules.read_write_dirs,
            vec![
                root.join("users/alice/agents/helper"),
                root.join("users/alice/memory")
            ]
        );
        for path in all_paths(&rules) {
            assert!(!path.starts_with(root.join("keys")), "{}", path.display());
            assert!(
                !path.starts_with(root.join("users/bob")),
                "{}",
                path.display()
            );
            assert!(
                !path.starts_with(root.join("agents")) || path == root.join("agents/helper"),
                "another agent: {}",
                path.display()
            );
            // Nothing grants the data directory itself, which holds keys/.
            assert_ne!(path, root, "the whole data directory is granted");
            assert!(path != root.join("users") && path != root.join("users/alice"));
        }
        assert!(rules.read_only.contains(&root.join("agents/helper")));
        assert!(rules.read_only.contains(&root.join("config.toml")));
        assert!(rules.read_only.contains(&root.join("access.toml")));
        assert!(rules.read_only.contains(&root.join("trust")));
        assert_eq!(rules.read_exec, vec![PathBuf::from("/usr/bin/bulwark")]);
        assert!(rules.sandboxed_children);
    }

    #[test]
    fn the_database_is_not_granted() {
        let rules = rules_for("alice", "helper", None);
        for path in all_paths(&rules) {
            assert!(
                !path.starts_with("/srv/bw/bulwark.db"),
                "the server brokers the store, the worker never opens it: {}",
                path.display()
            );
        }
        assert!(rules.read_write_files.is_empty());
    }

    #[test]
    fn bob_gets_bobs_directories_not_alices() {
        let rules = rules_for("bob", "helper", None);
        for path in all_paths(&rules) {
            assert!(
                !path.starts_with("/srv/bw/users/alice"),
                "{}",
                path.display()
            );
        }
        assert!(
            rules
                .read_write_dirs
                .contains(&PathBuf::from("/srv/bw/users/bob/memory"))
        );
    }

    #[test]
    fn model_files_are_granted_only_where_models_belong() {
        let granted = |model: &str| {
            rules_for("alice", "helper", Some(Path::new(model)))
                .read_only
                .contains(&PathBuf::from(model))
        };
        assert!(granted("/srv/bw/models/qwen.gguf"));
        // A local model adds no writable directory: its KV cache lives in
        // the user's own agent directory, never in one shared by users.
        let local = rules_for("alice", "helper", Some(Path::new("/srv/bw/models/q.gguf")));
        let remote = rules_for("alice", "helper", None);
        assert_eq!(local.read_write_dirs, remote.read_write_dirs);
        let kv = Home::new("/srv/bw")
            .kv_cache_dir("alice", "helper")
            .unwrap();
        assert!(local.read_write_dirs.iter().any(|d| kv.starts_with(d)));
        assert!(
            !local.read_write_dirs.iter().any(
                |d| d.starts_with("/srv/bw/cache") || Path::new("/srv/bw/cache").starts_with(d)
            )
        );
        assert!(granted("/opt/models/big.gguf"));
        // Inside the agent's directory: granted with the directory.
        assert!(!granted("/srv/bw/agents/helper/mine.gguf"));
        for refused in [
            "/srv/bw/keys/server.secret",
            "/srv/bw/users/bob/agents/helper/workspace/m.gguf",
            "/srv/bw/agents/other/m.gguf",
            "/srv/bw/bulwark.db",
        ] {
            assert!(!granted(refused), "{refused}");
        }
    }

    #[test]
    fn names_that_are_not_names_are_refused() {
        let home = Home::new("/srv/bw");
        assert!(worker_rules(&home, "../keys", "helper", None, None).is_err());
        assert!(worker_rules(&home, "alice", "a/b", None, None).is_err());
        for bad in ["", "Alice", "../x", "-x", "a b"] {
            assert!(parse_agent(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_user("alice").as_deref(), Ok("alice"));
    }

    #[test]
    fn strict_refuses_and_permissive_goes_on() {
        let refusal = decide(true, "Landlock is unavailable: ENOSYS").expect("strict refuses");
        assert!(
            refusal.contains("Landlock is unavailable: ENOSYS"),
            "{refusal}"
        );
        assert!(
            refusal.contains("enforcement = \"permissive\""),
            "{refusal}"
        );
        assert_eq!(decide(false, "Landlock is unavailable"), None);
    }

    /// A served agent's stdio MCP server runs in a sandbox nested in the
    /// worker's Landlock domain: its package directory and an absolute
    /// program must be in the worker's rules, or the server cannot start
    /// under `serve` at all; a config.toml entry the manifest names counts,
    /// one it does not name does not.
    #[test]
    fn mcp_servers_dirs_and_pins_are_granted_read_and_execute() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::new(dir.path());
        let agent_dir = dir.path().join("agents/helper");
        std::fs::create_dir_all(&agent_dir).expect("agent dir");
        std::fs::write(
            agent_dir.join("agent.toml"),
            "[agent]\nname = \"helper\"\n\n[tools]\nallow = [\"mcp:fs\", \"mcp:op\"]\n\n\
             [mcp.servers.fs]\ncommand = [\"/opt/node/bin/node\", \"server.js\"]\n\
             read_only = [\"/opt/peers/node\"]\n\n[mcp.servers.op]\n",
        )
        .expect("manifest");
        let pins = bulwark_mcp::pins::pin_path(dir.path(), "helper");
        std::fs::create_dir_all(pins.parent().expect("pins dir")).expect("pins dir");
        std::fs::write(&pins, "{}").expect("pins");
        let server = |program: &str, dir: &str| bulwark_policy::mcp::McpServerConfig {
            command: Some(vec![program.into()]),
            read_only: vec![PathBuf::from(dir)],
            ..Default::default()
        };
        let mut global = GlobalConfig::default();
        global
            .mcp
            .servers
            .insert("op".into(), server("op-server", "/opt/op"));
        global
            .mcp
            .servers
            .insert("other".into(), server("x", "/opt/other"));
        let (read_only, read_exec) = mcp_paths(&home, &global, "helper");
        assert_eq!(read_only, [pins]);
        for path in ["/opt/peers/node", "/opt/node/bin/node", "/opt/op"] {
            assert!(
                read_exec.contains(&PathBuf::from(path)),
                "{path}: {read_exec:?}"
            );
        }
        assert!(
            !read_exec.contains(&PathBuf::from("/opt/other")),
            "{read_exec:?}"
        );
        // No manifest: nothing but the (absent) pin file, which is dropped.
        let (read_only, read_exec) = mcp_paths(&home, &global, "nobody");
        assert!(read_only.is_empty() && read_exec.is_empty());
    }
}
