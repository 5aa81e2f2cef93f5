//! An interrupted turn stops at a step boundary: the tool already running
//! finishes, the calls after it never reach the door, a model reply in
//! flight is abandoned, and the stored history is whole (it needs no repair)
//! so the next turn continues normally.

use crate::common;

use bulwark_audit::{AuditSink, Decision};
use bulwark_kernel::{
    AgentRuntime, CancellationToken, DispatchResult, Door, Kernel, NOT_RUN_INTERRUPTED, Silent,
    ToolRegistry, TurnEnd, TurnObserver,
};
use bulwark_llm::{
    Block, ChatRequest, ChatResponse, LlmDriver, LlmError, Message, Role, ScriptDriver, StreamEvent,
};
use bulwark_store::{NewSession, Store};
use common::*;
use std::sync::Arc;

const WRITER: &str = r#"
[agent]
name = "tester"
[tools]
allow = ["files"]
[[capabilities]]
kind = "file_read"
path = "**"
[[capabilities]]
kind = "file_write"
path = "**"
"#;

/// One model reply asks for three writes; the next answers in text.
const THREE_WRITES: &str = r#"
{"tool_calls": [{"name": "file_write", "input": {"path": "a.txt", "content": "a"}}, {"name": "file_write", "input": {"path": "b.txt", "content": "b"}}, {"name": "file_write", "input": {"path": "c.txt", "content": "c"}}]}
{"text": "done"}
"#;

/// Interrupts (as the user's button would) once the first call is done.
struct InterruptAfterFirstResult {
    interrupt: CancellationToken,
    results: usize,
}

impl TurnObserver for InterruptAfterFirstResult {
    fn tool_result(&mut self, _name: &str, _result: &DispatchResult) {
        self.results += 1;
        self.interrupt.cancel();
    }
}

fn new_kernel(dir: &std::path::Path) -> (Kernel, Arc<dyn AuditSink>) {
    let store = Store::open(&dir.join("bulwark.db")).unwrap();
    let audit: Arc<dyn AuditSink> = Arc::new(store.audit_sink());
    store
        .create_session(&NewSession {
            id: "s1".into(),
            agent: "tester".into(),
            user: "local".into(),
        })
        .unwrap();
    let kernel = Kernel::new(
        Door::new(ToolRegistry::builtin(), audit.clone(), deny_all()),
        store,
    );
    (kernel, audit)
}

fn runtime(driver: Arc<dyn LlmDriver>) -> AgentRuntime {
    AgentRuntime {
        name: "tester".into(),
        system_prompt: "test".into(),
        model: "script".into(),
        driver,
        max_turns: 10,
        max_tokens: 1000,
    }
}

#[tokio::test]
async fn an_interrupt_between_calls_runs_no_further_call_and_keeps_history_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, audit) = new_kernel(dir.path());
    let mut s = session(dir.path(), policy(&ToolRegistry::builtin(), WRITER));
    let workspace = s.resources().workspace.root().to_path_buf();
    let agent = runtime(Arc::new(
        ScriptDriver::from_jsonl(THREE_WRITES, "inline").unwrap(),
    ));
    let interrupt = CancellationToken::new();
    let mut observer = InterruptAfterFirstResult {
        interrupt: interrupt.clone(),
        results: 0,
    };
    let mut history = Vec::new();
    let outcome = kernel
        .run_turn_interruptible(
            &mut s,
            &mut history,
            &agent,
            "write three files",
            &mut observer,
            &interrupt,
        )
        .await
        .unwrap();

    assert_eq!(outcome.end, TurnEnd::Interrupted);
    assert_eq!(outcome.tool_calls, 1, "only the first call ran");
    assert_eq!(observer.results, 1);
    assert!(
        workspace.join("a.txt").exists(),
        "the call in flight finished"
    );
    assert!(!workspace.join("b.txt").exists(), "a later call ran");
    assert!(!workspace.join("c.txt").exists(), "a later call ran");

    // Only the call that ran reached the door and the audit log.
    let calls: Vec<(String, Decision)> = audit
        .tail(50)
        .unwrap()
        .into_iter()
        .filter(|r| r.record.action == bulwark_audit::Action::ToolCall)
        .map(|r| (r.record.tool, r.record.decision))
        .collect();
    assert_eq!(calls, vec![("file_write".to_string(), Decision::Allowed)]);

    // The stored history pairs every call with a result: nothing to repair.
    let stored = kernel.history("s1").unwrap();
    assert_eq!(stored, history);
    assert_eq!(bulwark_llm::repair(stored.clone()), stored);
    let last = stored.last().unwrap();
    assert_eq!(last.role, Role::User);
    let results: Vec<(&str, bool)> = last
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolResult {
                content, is_error, ..
            } => Some((content.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3);
    assert!(!results[0].1, "the first call succeeded: {results:?}");
    assert_eq!(results[1], (NOT_RUN_INTERRUPTED, true));
    assert_eq!(results[2], (NOT_RUN_INTERRUPTED, true));

    // The conversation goes on: the next turn is answered normally.
    let next = kernel
        .run_turn(&mut s, &mut history, &agent, "thanks", &mut Silent)
        .await
        .unwrap();
    assert_eq!(next.end, TurnEnd::Completed);
    assert_eq!(next.text, "done");
}

/// A model that streams a word and then never finishes.
struct Stalls;

#[async_trait::async_trait]
impl LlmDriver for Stalls {
    fn provider(&self) -> &str {
        "stalls"
    }

    async fn chat(
        &self,
        _request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, LlmError> {
        on_event(StreamEvent::TextDelta("thinking".into()));
        std::future::pending().await
    }
}

#[tokio::test]
async fn an_interrupt_abandons_a_model_reply_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, _audit) = new_kernel(dir.path());
    let mut s = session(dir.path(), policy(&ToolRegistry::builtin(), WRITER));
    let agent = runtime(Arc::new(Stalls));
    let interrupt = CancellationToken::new();
    let later = interrupt.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        later.cancel();
    });
    let mut history = Vec::new();
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        kernel.run_turn_interruptible(
            &mut s,
            &mut history,
            &agent,
            "hello",
            &mut Silent,
            &interrupt,
        ),
    )
    .await
    .expect("the interrupt ended the stalled turn")
    .unwrap();
    assert_eq!(outcome.end, TurnEnd::Interrupted);
    assert_eq!(outcome.tool_calls, 0);
    // The user's message is kept; no half reply is stored.
    let stored = kernel.history("s1").unwrap();
    assert_eq!(stored, vec![Message::user_text("hello")]);
}

#[tokio::test]
async fn a_turn_that_is_never_interrupted_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, _audit) = new_kernel(dir.path());
    let mut s = session(dir.path(), policy(&ToolRegistry::builtin(), WRITER));
    let workspace = s.resources().workspace.root().to_path_buf();
    let agent = runtime(Arc::new(
        ScriptDriver::from_jsonl(THREE_WRITES, "inline").unwrap(),
    ));
    let interrupt = CancellationToken::new();
    let mut history = Vec::new();
    let outcome = kernel
        .run_turn_interruptible(
            &mut s,
            &mut history,
            &agent,
            "write three files",
            &mut Silent,
            &interrupt,
        )
        .await
        .unwrap();
    assert_eq!(outcome.end, TurnEnd::Completed);
    assert_eq!(outcome.tool_calls, 3);
    for name in ["a.txt", "b.txt", "c.txt"] {
        assert!(workspace.join(name).exists(), "{name} was not written");
    }
}
