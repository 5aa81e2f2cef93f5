//! The whole loop with the scripted driver: a granted call, an ungranted
//! tool, a repeated call and a `..` path; the audit shows each decision and
//! the turn completes.

use crate::common;

use bulwark_audit::{AuditSink, Decision, Reason};
use bulwark_kernel::{AgentRuntime, Door, Kernel, Silent, ToolRegistry, TurnEnd};
use bulwark_llm::{Block, ScriptDriver};
use bulwark_store::{NewSession, Store};
use common::*;
use std::sync::Arc;

const SCRIPT: &str = r#"
{"text": "reading", "tool_calls": [{"name": "file_read", "input": {"path": "notes.txt"}}]}
{"tool_calls": [{"name": "shell_exec", "input": {"argv": ["cat", "/etc/passwd"]}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "notes.txt"}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "notes.txt"}}]}
{"tool_calls": [{"name": "file_read", "input": {"path": "../../etc/passwd"}}]}
{"text": "The code name is BLUE HERON."}
"#;

#[tokio::test]
async fn scripted_agent_walks_through_every_decision() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let manifest =
        format!("{FILES_READ_ONLY}\n[loop_guard]\nwarn_threshold = 2\nblock_threshold = 3\n");
    let p = policy(&registry, &manifest);
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let kernel = Kernel::new(
        Door::new(registry, audit.clone(), deny_all()),
        store.clone(),
    );
    store
        .create_session(&NewSession {
            id: "s1".into(),
            agent: "tester".into(),
            user: "local".into(),
        })
        .unwrap();
    let mut s = session(dir.path(), p);
    std::fs::write(
        s.resources().workspace.root().join("notes.txt"),
        "code name BLUE HERON",
    )
    .unwrap();
    let agent = AgentRuntime {
        name: "tester".into(),
        system_prompt: "test".into(),
        model: "script".into(),
        driver: Arc::new(ScriptDriver::from_jsonl(SCRIPT, "inline").unwrap()),
        max_turns: 10,
        max_tokens: 1000,
    };
    let mut history = Vec::new();
    let outcome = kernel
        .run_turn(
            &mut s,
            &mut history,
            &agent,
            "what is the code name?",
            &mut Silent,
        )
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(outcome.tool_calls, 5);
    assert!(outcome.text.contains("BLUE HERON"));

    let calls: Vec<(String, Decision, Reason)> = audit
        .tail(100)
        .unwrap()
        .into_iter()
        .filter(|r| r.record.action == bulwark_audit::Action::ToolCall)
        .map(|r| (r.record.tool, r.record.decision, r.record.reason))
        .collect();
    let expected = [
        ("file_read", Decision::Allowed, Reason::Ok),
        ("shell_exec", Decision::Denied, Reason::Tool),
        ("file_read", Decision::Allowed, Reason::Ok),
        ("file_read", Decision::Denied, Reason::LoopGuard),
        ("file_read", Decision::Denied, Reason::Path),
    ];
    assert_eq!(calls.len(), expected.len(), "{calls:?}");
    for ((tool, decision, reason), (et, ed, er)) in calls.iter().zip(expected) {
        assert_eq!(
            (tool.as_str(), *decision, reason),
            (et, ed, &er),
            "{calls:?}"
        );
    }

    // The transcript is stored, resumable, and well-formed.
    let stored = kernel.history("s1").unwrap();
    assert_eq!(stored, history);
    assert!(bulwark_llm::validate(&stored).is_ok());
    let denied_results = stored
        .iter()
        .flat_map(|m| m.blocks.iter())
        .filter(|b| matches!(b, Block::ToolResult { is_error: true, .. }))
        .count();
    assert_eq!(denied_results, 3);
}

#[tokio::test]
async fn provider_failure_ends_the_turn_with_an_error_and_keeps_history() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let p = policy(&registry, FILES_READ_ONLY);
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let kernel = Kernel::new(Door::new(registry, audit, deny_all()), store.clone());
    store
        .create_session(&NewSession {
            id: "s1".into(),
            agent: "tester".into(),
            user: "local".into(),
        })
        .unwrap();
    let mut s = session(dir.path(), p);
    let agent = AgentRuntime {
        name: "tester".into(),
        system_prompt: "test".into(),
        model: "script".into(),
        driver: Arc::new(ScriptDriver::from_jsonl(r#"{"error": "overloaded"}"#, "inline").unwrap()),
        max_turns: 3,
        max_tokens: 100,
    };
    let mut history = Vec::new();
    let err = kernel
        .run_turn(&mut s, &mut history, &agent, "hi", &mut Silent)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("overloaded"), "{err}");
    assert_eq!(
        kernel.history("s1").unwrap().len(),
        1,
        "the user message is kept"
    );
}

/// The operator's name is the one access.toml may not define (the policy
/// crate keeps the list; the kernel's constant must be the same name), and
/// a home whose access.toml defines it does not load.
#[test]
fn the_operators_name_is_reserved_in_access_toml() {
    use bulwark_policy::AccessFile;
    assert_eq!(bulwark_kernel::LOCAL_USER, AccessFile::LOCAL_USER);
    assert!(AccessFile::reserved_user_name(bulwark_kernel::LOCAL_USER).is_some());

    let dir = tempfile::tempdir().unwrap();
    let home = bulwark_kernel::Home::new(dir.path());
    let hash = "0".repeat(64);
    std::fs::write(
        home.access_path(),
        format!("[[users.local.tokens]]\nid = \"abc\"\nhash = \"{hash}\"\n"),
    )
    .unwrap();
    let err = home.load_access().unwrap_err().to_string();
    let path = home.access_path().display().to_string();
    assert!(err.contains(&path), "{err}");
    assert!(err.contains("may not hold tokens"), "{err}");
    // Its limits, without tokens, load.
    std::fs::write(
        home.access_path(),
        "[users.local.limits]\ntokens_per_day = 5\n",
    )
    .unwrap();
    assert!(home.load_access().unwrap().users.contains_key("local"));
    std::fs::write(home.access_path(), "[users.locals]\n").unwrap();
    assert!(home.load_access().unwrap().users.contains_key("locals"));
}

/// A model endpoint that answers "done" and remembers the `max_tokens` and
/// the system prompt of every request it was sent.
struct Recording {
    provider: &'static str,
    seen: std::sync::Mutex<Vec<u32>>,
    systems: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl bulwark_llm::LlmDriver for Recording {
    fn provider(&self) -> &str {
        self.provider
    }
    async fn chat(
        &self,
        request: &bulwark_llm::ChatRequest,
        _on_event: &mut (dyn FnMut(bulwark_llm::StreamEvent) + Send),
    ) -> Result<bulwark_llm::ChatResponse, bulwark_llm::LlmError> {
        self.seen.lock().unwrap().push(request.max_tokens);
        self.systems.lock().unwrap().push(request.system.clone());
        Ok(bulwark_llm::ChatResponse {
            message: bulwark_llm::Message::assistant_text("done"),
            stop: bulwark_llm::StopReason::EndTurn,
            usage: bulwark_llm::Usage {
                input_tokens: 1,
                output_tokens: 1,
            },
        })
    }
}

/// One turn of an agent with `caps` (capability tables) on `provider:gpt`
/// asking for `max_tokens`: the outcome, the `max_tokens` the endpoint saw
/// and the audit records.
async fn one_turn(caps: &str, provider: &'static str, max_tokens: u32) -> OneTurn {
    let (outcome, seen, records, _) = one_turn_seen(caps, provider, max_tokens).await;
    (outcome, seen, records)
}

/// What [`one_turn`] returns: the outcome, the `max_tokens` the endpoint
/// saw, the audit records.
type OneTurn = (
    bulwark_kernel::TurnOutcome,
    Vec<u32>,
    Vec<bulwark_audit::AuditRecord>,
);

/// [`one_turn`], with the system prompts the endpoint was sent.
async fn one_turn_seen(
    caps: &str,
    provider: &'static str,
    max_tokens: u32,
) -> (
    bulwark_kernel::TurnOutcome,
    Vec<u32>,
    Vec<bulwark_audit::AuditRecord>,
    Vec<String>,
) {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::builtin();
    let p = policy(&registry, &format!("{FILES_READ_ONLY}\n{caps}"));
    let store = Store::open(&dir.path().join("bulwark.db")).unwrap();
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    let kernel = Kernel::new(
        Door::new(registry, audit.clone(), deny_all()),
        store.clone(),
    );
    store
        .create_session(&NewSession {
            id: "s1".into(),
            agent: "tester".into(),
            user: "local".into(),
        })
        .unwrap();
    let mut s = session(dir.path(), p);
    let driver = Arc::new(Recording {
        provider,
        seen: std::sync::Mutex::new(Vec::new()),
        systems: std::sync::Mutex::new(Vec::new()),
    });
    let agent = AgentRuntime {
        name: "tester".into(),
        system_prompt: "test".into(),
        model: "gpt".into(),
        driver: driver.clone(),
        max_turns: 2,
        max_tokens,
    };
    let outcome = kernel
        .run_turn(&mut s, &mut Vec::new(), &agent, "hi", &mut Silent)
        .await
        .unwrap();
    let seen = driver.seen.lock().unwrap().clone();
    let systems = driver.systems.lock().unwrap().clone();
    let records = audit
        .tail(100)
        .unwrap()
        .into_iter()
        .map(|r| r.record)
        .collect();
    (outcome, seen, records, systems)
}

/// A prompt cache (the local model's prefix cache on disk, a provider's
/// prompt caching) can only reuse a system prompt that is the same in every
/// session. Each session still has its own boundary nonce: it rides in the
/// tool results, never in the system prompt.
#[tokio::test]
async fn every_session_of_an_agent_gets_the_same_system_prompt() {
    let (first, _, _, a) = one_turn_seen("", "openai", 100).await;
    let (second, _, _, b) = one_turn_seen("", "openai", 100).await;
    assert_eq!(first.end, TurnEnd::Completed);
    assert_eq!(second.end, TurnEnd::Completed);
    assert_eq!(a.len(), 1);
    assert_eq!(a, b, "two sessions saw different system prompts");
    assert!(a[0].starts_with("test\n\n"), "{}", a[0]);
    assert!(a[0].contains("<untrusted_ID>"), "{}", a[0]);
}

const ONLY_ANTHROPIC: &str = "[[capabilities]]\nkind = \"llm_query\"\nmodel = \"anthropic:*\"\n";

#[tokio::test]
async fn a_model_outside_llm_query_is_never_called_and_the_refusal_is_audited() {
    let (outcome, seen, records) = one_turn(ONLY_ANTHROPIC, "openai", 100).await;
    assert!(seen.is_empty(), "the endpoint was called: {seen:?}");
    assert!(
        matches!(&outcome.end, TurnEnd::Stopped(why) if why.contains("openai:gpt")),
        "{:?}",
        outcome.end
    );
    let refused: Vec<_> = records
        .iter()
        .filter(|r| r.action == bulwark_audit::Action::ModelCall && r.operation == "llm_query")
        .collect();
    assert_eq!(refused.len(), 1, "{records:?}");
    assert_eq!(refused[0].decision, Decision::Denied);
    assert!(refused[0].detail.contains("openai:gpt"), "{:?}", refused[0]);
}

#[tokio::test]
async fn a_model_llm_query_covers_is_called() {
    let (outcome, seen, records) = one_turn(ONLY_ANTHROPIC, "anthropic", 100).await;
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(seen, [100]);
    assert!(
        !records
            .iter()
            .any(|r| r.action == bulwark_audit::Action::ModelCall)
    );
    // Without any llm_query, the configured model is called as before.
    let (outcome, seen, _) = one_turn("", "openai", 100).await;
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(seen, [100]);
}

#[tokio::test]
async fn llm_max_tokens_caps_what_each_model_call_asks_for() {
    let cap = "[[capabilities]]\nkind = \"llm_max_tokens\"\nmax = 256\n";
    // The attack: the manifest asks for far more than the limit.
    let (outcome, seen, _) = one_turn(cap, "openai", 8000).await;
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(seen, [256], "the request was not lowered to the limit");
    // The work: a call within the limit is sent as asked.
    let (outcome, seen, _) = one_turn(cap, "openai", 200).await;
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(seen, [200]);
}
