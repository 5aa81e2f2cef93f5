//! Each worker's environment holds exactly its own agent's keys: the
//! server decides it per conversation, at open, from that one agent.

use super::*;
use std::collections::HashMap;
use std::path::Path;

/// An agent on `model` whose credential grant uses `key`.
fn agent(home: &Path, name: &str, model: &str, key: &str, extra: &str) {
    let dir = home.join("agents").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = format!(
        r#"[agent]
name = "{name}"
model = "{model}"
[tools]
allow = ["web"]
[sandbox]
allowed_domains = ["api.example.com"]
[credentials.grants.api]
keys = ["{key}"]
tools = ["web"]
hosts = ["api.example.com"]
inject = [{{ header = "Authorization", value = "Bearer ${{{key}}}" }}]
{extra}"#
    );
    std::fs::write(dir.join("agent.toml"), manifest).unwrap();
}

/// What the server's start-up environment held.
fn server_environment() -> HashMap<String, SecretString> {
    [
        ("ALPHA_TOKEN", "alpha-secret"),
        ("BETA_TOKEN", "beta-secret"),
        ("ANTHROPIC_API_KEY", "anthropic-key"),
        ("OPENAI_API_KEY", "openai-key"),
        ("SHARED_TOKEN", "shared"),
        ("UNRELATED_SECRET", "unrelated"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), SecretString::from(v)))
    .collect()
}

fn home_with_two_agents(root: &Path) -> Home {
    std::fs::write(
        root.join("config.toml"),
        "[secrets]\nenv = [\"SHARED_TOKEN\"]\n",
    )
    .unwrap();
    agent(root, "alpha", "anthropic:claude-x", "ALPHA_TOKEN", "");
    agent(root, "beta", "openai:gpt-x", "BETA_TOKEN", "");
    Home::new(root)
}

fn keys(home: &Home) -> AgentKeys {
    let env = server_environment();
    AgentKeys::with_lookup(home, move |name| env.get(name).cloned())
}

/// Opens a conversation with `agent` through the server's backend, with a
/// "worker" that writes its environment to a file and exits; that
/// environment.
async fn worker_environment_of(root: &Path, agent: &str) -> HashMap<String, String> {
    let home = Home::new(root);
    let out = root.join(format!("{agent}.env"));
    let script = format!("env > '{}'", out.display());
    let mut config = SupervisorConfig::new("/bin/sh", ["-c", script.as_str()], root);
    config.ready_timeout = Duration::from_secs(30);
    let backend = WorkerBackend {
        supervisor: Supervisor::new(config),
        keys: Arc::new(keys(&home)),
    };
    let opened = backend
        .open(OpenRequest {
            user: "alice".into(),
            agent: agent.into(),
            resume: None,
        })
        .await;
    assert!(opened.is_err(), "the stand-in exits without serving");
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_holds_its_own_agents_keys_and_no_other_agents() {
    let dir = tempfile::tempdir().unwrap();
    home_with_two_agents(dir.path());
    let alpha = worker_environment_of(dir.path(), "alpha").await;
    assert_eq!(
        alpha.get("ALPHA_TOKEN").map(String::as_str),
        Some("alpha-secret")
    );
    assert_eq!(
        alpha.get("ANTHROPIC_API_KEY").map(String::as_str),
        Some("anthropic-key")
    );
    assert_eq!(
        alpha.get("SHARED_TOKEN").map(String::as_str),
        Some("shared")
    );
    for other in ["BETA_TOKEN", "OPENAI_API_KEY", "UNRELATED_SECRET"] {
        assert!(!alpha.contains_key(other), "alpha's worker holds {other}");
    }
    let beta = worker_environment_of(dir.path(), "beta").await;
    assert_eq!(
        beta.get("BETA_TOKEN").map(String::as_str),
        Some("beta-secret")
    );
    assert_eq!(
        beta.get("OPENAI_API_KEY").map(String::as_str),
        Some("openai-key")
    );
    for other in ["ALPHA_TOKEN", "ANTHROPIC_API_KEY", "UNRELATED_SECRET"] {
        assert!(!beta.contains_key(other), "beta's worker holds {other}");
    }
}

#[test]
fn an_agent_may_hold_the_keys_of_the_providers_it_may_query() {
    let dir = tempfile::tempdir().unwrap();
    let home = home_with_two_agents(dir.path());
    let query = "[[capabilities]]\nkind = \"llm_query\"\nmodel = \"openai:gpt-*\"\n";
    agent(
        dir.path(),
        "asker",
        "anthropic:claude-x",
        "ALPHA_TOKEN",
        query,
    );
    let global = home.load_global().unwrap();
    let names = keys(&home).names(&global, "asker").unwrap();
    assert_eq!(
        names,
        [
            "ALPHA_TOKEN",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "SHARED_TOKEN"
        ]
    );
    let alpha = keys(&home).names(&global, "alpha").unwrap();
    assert_eq!(alpha, ["ALPHA_TOKEN", "ANTHROPIC_API_KEY", "SHARED_TOKEN"]);
}

#[test]
fn an_agent_that_does_not_load_gets_only_the_shared_keys() {
    let dir = tempfile::tempdir().unwrap();
    let home = home_with_two_agents(dir.path());
    let global = home.load_global().unwrap();
    let names = keys(&home).names(&global, "missing").unwrap();
    assert_eq!(names, ["SHARED_TOKEN"]);
}
