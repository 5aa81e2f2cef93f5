//! A worker's environment is the allowlist and nothing else, whatever the
//! supervisor's own environment holds.
//!
//! The test re-runs itself as a child process with secret-looking and
//! injection variables set (so the supervising process really has them,
//! without mutating this process's environment), and the child checks
//! what a worker it supervises sees.

use super::common::*;
use bulwark_protocol::protocol::Event;
use bulwark_server::workers::{
    Conversation, EnvError, OpenRequest, Supervisor, SupervisorError, WorkerEnv,
};
use secrecy::SecretString;
use std::collections::BTreeMap;

const CHILD_FLAG: &str = "BW_ENV_TEST_SUPERVISOR";

/// This test's name as libtest filters it: its module path without the
/// crate's name (so it still holds when the module moves).
fn test_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    format!("{module}::a_worker_sees_only_the_allowlisted_environment")
}

const PLANTED: &[(&str, &str)] = &[
    ("BW_TEST_SECRET_TOKEN", "sk-test-must-not-leak"),
    ("NODE_OPTIONS", "--inspect=0.0.0.0:9229"),
    ("LD_LIBRARY_PATH", "/tmp/not-a-library-dir"),
    ("RUST_BACKTRACE", "1"),
    ("BULWARK_LOG", "trace"),
];

#[test]
fn a_worker_sees_only_the_allowlisted_environment() {
    if std::env::var_os(CHILD_FLAG).is_some() {
        return supervise_and_check();
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", &test_name(), "--nocapture", "--test-threads=1"])
        .env(CHILD_FLAG, "1");
    for (name, value) in PLANTED {
        child.env(name, value);
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the check ran in the child: {stdout}"
    );
}

fn supervise_and_check() {
    for (name, value) in PLANTED {
        assert_eq!(std::env::var(name).as_deref(), Ok(*value), "planted {name}");
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut config = config("good");
        config.env = config
            .env
            .with_var("PROVIDER_API_KEY", SecretString::from("pk-granted"))
            .unwrap();
        let expected_names: Vec<String> =
            config.env.names().iter().map(|n| n.to_string()).collect();
        let home = config.bulwark_home.clone();
        let supervisor = Supervisor::new(config);
        let mut conversation = supervisor.open(request("alice")).await.unwrap();
        say(&conversation, 1, "env").await;
        let events = turn(&mut conversation, 1).await;
        let Event::TextDelta { text, .. } = &events[0] else {
            panic!("{events:?}");
        };
        let seen: BTreeMap<&str, &str> = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .collect();
        let mut names: Vec<String> = seen.keys().map(|k| k.to_string()).collect();
        let mut expected = expected_names;
        names.sort();
        expected.sort();
        assert_eq!(names, expected, "exactly the allowlist");
        assert_eq!(seen.get("PROVIDER_API_KEY"), Some(&"pk-granted"));
        assert_eq!(seen.get("FAKE_WORKER_MODE"), Some(&"good"));
        assert_eq!(
            seen.get("BULWARK_HOME").map(std::path::PathBuf::from),
            Some(std::path::absolute(home).unwrap())
        );
        for (name, value) in PLANTED {
            assert!(!seen.contains_key(name), "{name} reached the worker");
            assert!(
                !text.contains(value),
                "the value of {name} reached the worker"
            );
        }
    });
}

#[test]
fn configuration_cannot_pass_injection_or_runtime_option_variables() {
    for name in [
        "LD_PRELOAD",
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "BULWARK_SANDBOX_SPEC",
    ] {
        let err = WorkerEnv::from_process()
            .with_var(name, SecretString::from("x"))
            .err();
        assert_eq!(err, Some(EnvError::Forbidden(name.into())), "{name}");
    }
    let err = WorkerEnv::from_process()
        .with_var("A", SecretString::from("1"))
        .unwrap()
        .with_var("A", SecretString::from("2"))
        .err();
    assert_eq!(err, Some(EnvError::Duplicate("A".into())));
}

/// What the fake worker of `conversation` reports as its environment.
async fn reported_environment(conversation: &mut Conversation, id: u64) -> String {
    say(conversation, id, "env").await;
    let events = turn(conversation, id).await;
    let Event::TextDelta { text, .. } = &events[0] else {
        panic!("{events:?}");
    };
    text.clone()
}

#[tokio::test]
async fn an_open_requests_keys_reach_only_its_own_worker() {
    let supervisor = Supervisor::new(config("good"));
    let with_key = |user: &str, name: &str, value: &str| OpenRequest {
        keys: vec![(name.to_string(), SecretString::from(value))],
        ..request(user)
    };
    let mut alpha = supervisor
        .open(with_key("alice", "ALPHA_TOKEN", "alpha-secret"))
        .await
        .unwrap();
    let mut beta = supervisor
        .open(with_key("bob", "BETA_TOKEN", "beta-secret"))
        .await
        .unwrap();
    let alpha_env = reported_environment(&mut alpha, 1).await;
    let beta_env = reported_environment(&mut beta, 1).await;
    assert!(alpha_env.lines().any(|l| l == "ALPHA_TOKEN=alpha-secret"));
    assert!(!alpha_env.contains("BETA_TOKEN") && !alpha_env.contains("beta-secret"));
    assert!(beta_env.lines().any(|l| l == "BETA_TOKEN=beta-secret"));
    assert!(!beta_env.contains("ALPHA_TOKEN") && !beta_env.contains("alpha-secret"));
}

#[tokio::test]
async fn an_open_request_cannot_pass_injection_variables() {
    let supervisor = Supervisor::new(config("good"));
    let request = OpenRequest {
        keys: vec![("LD_PRELOAD".into(), SecretString::from("/tmp/x.so"))],
        ..request("alice")
    };
    let err = supervisor.open(request).await.err();
    assert!(
        matches!(
            err,
            Some(SupervisorError::Env(EnvError::Forbidden(ref name))) if name == "LD_PRELOAD"
        ),
        "{err:?}"
    );
    assert_eq!(supervisor.stats().workers, 0, "nothing was spawned");
}
