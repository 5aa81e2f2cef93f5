//! `bulwark credentials check <agent>`: which keys an agent may have
//! injected, where and how, which are missing, and whether it runs in the
//! unscoped legacy mode. Reads names and templates only, never a value.

use crate::{Failure, usage_error};
use anyhow::anyhow;
use bulwark_kernel::{Home, LoadedAgent, environment, load_secrets};
use bulwark_net::MIN_GUARDED_SECRET_LEN;
use bulwark_policy::{CredentialMode, GlobalConfig, GrantApproval, InjectionTarget};
use secrecy::ExposeSecret;

/// One finding, printed as `status  topic  text` like `preflight`.
pub struct Finding {
    pub status: &'static str,
    pub text: String,
}

impl Finding {
    fn new(status: &'static str, text: String) -> Self {
        Finding { status, text }
    }
    pub fn is_problem(&self) -> bool {
        self.status == "FAIL"
    }
}

fn key_state(name: &str) -> (&'static str, String) {
    let len = environment().get(name).map(|v| v.expose_secret().len());
    match len {
        Some(n) if n >= MIN_GUARDED_SECRET_LEN => ("ok", format!("{name} is set")),
        Some(_) => (
            "WARN",
            format!(
                "{name} is set but shorter than {MIN_GUARDED_SECRET_LEN} characters, too short for the exfiltration guard to recognize"
            ),
        ),
        _ => (
            "FAIL",
            format!("{name} is not set: export it before starting bulwark"),
        ),
    }
}

/// The credential findings for `agent` (shared with `preflight`).
pub fn findings(global: &GlobalConfig, agent: &LoadedAgent) -> Vec<Finding> {
    let mut out = Vec::new();
    let grants = &agent.manifest.credentials.grants;
    match agent.manifest.credential_mode() {
        CredentialMode::Legacy => out.push(Finding::new(
            "WARN",
            "LEGACY MODE: no [credentials.grants] declared, so any key in config.toml [secrets] env \
             may be placed (as ${KEY}) into a request to any host this agent can reach. \
             Declare grants to scope each key to tool domains and hosts."
                .into(),
        )),
        CredentialMode::Strict => out.push(Finding::new(
            "ok",
            format!("strict mode: {} grant(s); keys go only where a grant sends them", grants.len()),
        )),
    }
    for (name, grant) in grants {
        let mut how: Vec<String> = grant
            .inject
            .iter()
            .map(|i| match i.target() {
                InjectionTarget::Header(h) => format!("header {h}: {:?}", i.value),
                InjectionTarget::Query(q) => format!("query {q}={:?}", i.value),
            })
            .collect();
        if how.is_empty() {
            how.push("placeholders only (${KEY} in a tool's header)".into());
        }
        let approval = match grant.approval {
            Some(GrantApproval::Required) => "only in calls a person approved",
            None => "automatic",
        };
        out.push(Finding::new(
            "ok",
            format!(
                "grant {name}: keys {} · tools {} · hosts {} · {} · {approval}",
                grant.keys.join(", "),
                grant.tools.join(", "),
                if grant.hosts.is_empty() {
                    "(none: the shell environment only)".to_string()
                } else {
                    grant.hosts.join(", ")
                },
                how.join("; ")
            ),
        ));
        for key in &grant.keys {
            let (status, text) = key_state(key);
            out.push(Finding::new(status, format!("grant {name}: {text}")));
        }
    }
    for key in &global.secrets.env {
        let (status, text) = key_state(key);
        // Unused by a strict agent's grants: informational only.
        let status = if status == "FAIL" && grants.values().all(|g| !g.keys.contains(key)) {
            "note"
        } else {
            status
        };
        out.push(Finding::new(status, format!("[secrets] env: {text}")));
    }
    let (store, _) = load_secrets(global, agent);
    let guarded: Vec<&str> = store.names().filter(|n| !store.is_injectable(n)).collect();
    if !guarded.is_empty() {
        out.push(Finding::new(
            "ok",
            format!(
                "provider keys {} are guarded: never injected, refused if a request carries them",
                guarded.join(", ")
            ),
        ));
    }
    out
}

pub fn check(home: &Home, agent_name: &str, require_strict: bool) -> Result<(), Failure> {
    let global = home.load_global().map_err(usage_error)?;
    let loaded = home.load_agent(agent_name).map_err(usage_error)?;
    println!("credentials of agent {agent_name}");
    let found = findings(&global, &loaded);
    for f in &found {
        println!("{:<5} {}", f.status, f.text);
    }
    let problems = found.iter().filter(|f| f.is_problem()).count();
    if problems > 0 {
        return Err(Failure {
            code: 1,
            error: anyhow!("{problems} credential problem(s)"),
        });
    }
    if require_strict && loaded.manifest.credential_mode() == CredentialMode::Legacy {
        return Err(Failure {
            code: 1,
            error: anyhow!("agent {agent_name} runs in legacy credential mode (--require-strict)"),
        });
    }
    Ok(())
}
