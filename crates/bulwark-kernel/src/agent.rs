//! The agent loop: repair history, ask the model, send every tool call through
//! the door, feed results back, until the model answers or a limit is reached.

use crate::conversation::ConversationStore;
use crate::door::{DispatchResult, Door, ToolCall};
use crate::session::Session;
use bulwark_llm::{Block, ChatRequest, LlmDriver, LlmError, Message, Role, StreamEvent, Usage};
use bulwark_policy::Verdict;
use bulwark_store::StoreError;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The content of the result given to a tool call the turn did not run
/// because the user interrupted it. The call never reached the door, so it
/// had no effect and has no audit record.
pub const NOT_RUN_INTERRUPTED: &str = "not run: the user interrupted the turn";

/// A configured agent: its prompt and the model endpoint it talks to.
pub struct AgentRuntime {
    pub name: String,
    pub system_prompt: String,
    /// The provider's model name (without the `provider:` prefix).
    pub model: String,
    pub driver: Arc<dyn LlmDriver>,
    pub max_turns: u32,
    pub max_tokens: u32,
}

/// Receives progress while a turn runs (the CLI prints it; the server relays it).
pub trait TurnObserver: Send {
    fn text_delta(&mut self, _text: &str) {}
    fn tool_call(&mut self, _name: &str, _input: &Value) {}
    fn tool_result(&mut self, _name: &str, _result: &DispatchResult) {}
}

/// An observer that ignores everything.
pub struct Silent;
impl TurnObserver for Silent {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model answered without asking for more tools.
    Completed,
    /// `max_turns` model calls were made and it still wanted tools.
    MaxTurns,
    /// The session was stopped (loop guard breaker, token budget, audit failure).
    Stopped(String),
    /// The user interrupted the turn; it stopped at the next step boundary.
    Interrupted,
    /// The ledger refused to reserve the next model call's maximum cost
    /// (balance, reserve floor, daily cap or user budget): the call was not
    /// made. The session goes on once the account is funded.
    Unfunded(String),
}

#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// The text of the model's last message.
    pub text: String,
    pub end: TurnEnd,
    pub tool_calls: u32,
    pub usage: Usage,
}

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot encode session data: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("{0}")]
    Setup(String),
    #[error("the audit log could not store this session's records: {0}")]
    Audit(String),
    #[error("the credits ledger failed: {0}")]
    Ledger(#[from] bulwark_store::LedgerError),
}

/// Runs the agent loop around one user message.
pub struct Kernel {
    pub door: Door,
    pub store: Arc<dyn ConversationStore>,
}

impl Kernel {
    pub fn new(door: Door, store: impl ConversationStore + 'static) -> Self {
        Self {
            door,
            store: Arc::new(store),
        }
    }

    /// A kernel over a store already shared (a worker's broker client).
    pub fn with_shared_store(door: Door, store: Arc<dyn ConversationStore>) -> Self {
        Self { door, store }
    }

    fn persist(&self, session: &Session, message: &Message) -> Result<(), KernelError> {
        let json = serde_json::to_string(message)?;
        self.store
            .append_message(&session.identity.id, role_name(message.role), &json)?;
        Ok(())
    }

    /// The durability barrier: every decision so far is stored before
    /// anything (a tool result, the final answer) leaves the loop. A failure
    /// stops the session.
    fn flush_audit(&self, session: &mut Session) -> Result<(), KernelError> {
        self.door.audit().flush().map_err(|err| {
            session.stop("audit sink failed");
            KernelError::Audit(err.to_string())
        })
    }

    /// A model call its session's limits refuse: audited (and flushed)
    /// before the turn ends, and never sent.
    fn refuse_model_call(
        &self,
        session: &mut Session,
        kind: &str,
        why: String,
        tool_calls: u32,
        usage: Usage,
    ) -> Result<TurnOutcome, KernelError> {
        let written = self.door.audit().record(&bulwark_audit::AuditRecord::new(
            crate::door::audit_identity(session),
            bulwark_audit::Event::new(
                bulwark_audit::Action::ModelCall,
                bulwark_audit::Decision::Denied,
                bulwark_audit::Reason::Capability,
            )
            .operation(kind)
            .detail(why.clone()),
        ));
        if let Err(err) = written {
            session.stop("audit sink failed");
            return Err(KernelError::Audit(format!(
                "the refusal of a model call could not be recorded ({err}); the session is stopped"
            )));
        }
        self.flush_audit(session)?;
        self.save_state(session)?;
        Ok(TurnOutcome {
            text: why.clone(),
            end: TurnEnd::Stopped(why),
            tool_calls,
            usage,
        })
    }

    fn save_state(&self, session: &Session) -> Result<(), KernelError> {
        let json = serde_json::to_string(session.state())?;
        self.store.save_state(&session.identity.id, &json)?;
        Ok(())
    }

    /// Loads a session's history from the store.
    pub fn history(&self, session_id: &str) -> Result<Vec<Message>, KernelError> {
        let rows = self.store.messages(session_id)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(serde_json::from_str(&row)?);
        }
        Ok(out)
    }

    pub async fn run_turn(
        &self,
        session: &mut Session,
        history: &mut Vec<Message>,
        agent: &AgentRuntime,
        user_text: &str,
        observer: &mut dyn TurnObserver,
    ) -> Result<TurnOutcome, KernelError> {
        let never = CancellationToken::new();
        self.run_turn_interruptible(session, history, agent, user_text, observer, &never)
            .await
    }

    /// [`run_turn`](Self::run_turn), stoppable by `interrupt`.
    ///
    /// Why not just drop the future: a turn dropped mid-way can leave an
    /// assistant message whose tool calls have no results, and a tool that
    /// was about to run may or may not have. Here the turn stops only at a
    /// step boundary: a model reply in flight is abandoned (nothing of it is
    /// stored), a tool already dispatched finishes (its effect and audit
    /// record are whole), and every call after it gets a
    /// [`NOT_RUN_INTERRUPTED`] result, so the stored history stays valid
    /// and the next turn needs no repair.
    pub async fn run_turn_interruptible(
        &self,
        session: &mut Session,
        history: &mut Vec<Message>,
        agent: &AgentRuntime,
        user_text: &str,
        observer: &mut dyn TurnObserver,
        interrupt: &CancellationToken,
    ) -> Result<TurnOutcome, KernelError> {
        let user = Message::user_text(user_text);
        self.persist(session, &user)?;
        history.push(user);
        // What the user and the operator wrote: value mode's trusted words.
        session.note_trusted_text(user_text);
        session.note_trusted_text(&agent.system_prompt);

        let system = format!(
            "{}\n\n{}",
            agent.system_prompt.trim_end(),
            crate::Boundary::instruction()
        );
        let tools = self.door.registry().definitions_for(&session.policy);
        let mut usage = Usage::default();
        let mut tool_calls = 0u32;
        let mut last_text = String::new();

        for _ in 0..agent.max_turns.max(1) {
            if interrupt.is_cancelled() {
                return self.interrupted(session, last_text, tool_calls, usage);
            }
            if let Some(why) = session.state().stopped.clone() {
                return Ok(TurnOutcome {
                    text: last_text,
                    end: TurnEnd::Stopped(why),
                    tool_calls,
                    usage,
                });
            }
            let limits = &session.policy.call_limits;
            let model_id = format!("{}:{}", agent.driver.provider(), agent.model);
            if !limits.model_allowed(&model_id) {
                let why = format!(
                    "the model call was not made: agent {} may not query {model_id} (its llm_query capabilities, in every layer that declares them, must cover the session's model); choose a model they cover, or grant llm_query for this one",
                    session.identity.agent
                );
                return self.refuse_model_call(session, "llm_query", why, tool_calls, usage);
            }
            // llm_max_tokens: the request never asks for more than the limit.
            let request = ChatRequest {
                model: agent.model.clone(),
                system: system.clone(),
                messages: bulwark_llm::repair(history.clone()),
                tools: tools.clone(),
                max_tokens: limits.tokens_for(agent.max_tokens),
                // Per call: the turn's own calls may have written files.
                paths: crate::path_choices::path_choices(self.door.registry(), &tools, session),
            };
            if let Some(credits) = &session.credits {
                let maximum = credits.model_call_maximum(&request);
                if !limits.spend_allowed(maximum) {
                    let why = format!(
                        "the model call was not made: it may cost up to {maximum} credits and agent {} may reserve at most {} per call (econ_spend); lower max_tokens or raise econ_spend",
                        session.identity.agent,
                        limits.max_spend.unwrap_or(0)
                    );
                    return self.refuse_model_call(session, "econ_spend", why, tool_calls, usage);
                }
            }
            let reserved = match &session.credits {
                Some(credits) => {
                    match credits.reserve("model", credits.model_call_maximum(&request)) {
                        Ok(reserved) => reserved,
                        Err(refusal) if refusal.is_denial() => {
                            self.flush_audit(session)?;
                            self.save_state(session)?;
                            let why = format!(
                                "the model call was not made: its maximum cost could not be reserved: {refusal}"
                            );
                            return Ok(TurnOutcome {
                                text: why.clone(),
                                end: TurnEnd::Unfunded(why),
                                tool_calls,
                                usage,
                            });
                        }
                        Err(err) => return Err(err.into()),
                    }
                }
                None => None,
            };
            let response = {
                let mut on_event = |event: StreamEvent| {
                    if let StreamEvent::TextDelta(text) = event {
                        observer.text_delta(&text);
                    }
                };
                tokio::select! {
                    biased;
                    () = interrupt.cancelled() => None,
                    response = agent.driver.chat(&request, &mut on_event) => Some(response),
                }
            };
            let response = match (response, reserved, &session.credits) {
                (Some(Ok(response)), Some(reserved), Some(credits)) => {
                    let (_, uncharged) =
                        credits.settle(reserved, credits.model_call_cost(&response.usage))?;
                    if uncharged > 0 {
                        // The estimate is an upper bound for real
                        // tokenizers; a provider reporting more is worth a
                        // record, and never an overdraft.
                        // A warning the log cannot take stops the session,
                        // as any other audit failure does.
                        let written = self.door.audit().record(&bulwark_audit::AuditRecord::new(
                            crate::door::audit_identity(session),
                            bulwark_audit::Event::new(
                                bulwark_audit::Action::Ledger,
                                bulwark_audit::Decision::Warned,
                                bulwark_audit::Reason::ModelOverrun,
                            )
                            .tool("credits")
                            .operation("model_overrun")
                            .detail(format!(
                                "the model call cost {uncharged} more than its reservation; the excess was not charged"
                            )),
                        ));
                        if let Err(err) = written {
                            session.stop("audit sink failed");
                            return Err(KernelError::Audit(format!(
                                "the model overrun warning was refused ({err}); the session is stopped"
                            )));
                        }
                    }
                    Some(Ok(response))
                }
                (other, Some(reserved), Some(credits)) => {
                    credits.release(reserved)?;
                    other
                }
                (other, _, _) => other,
            };
            let Some(response) = response else {
                return self.interrupted(session, last_text, tool_calls, usage);
            };
            let response = response?;
            usage.input_tokens += response.usage.input_tokens;
            usage.output_tokens += response.usage.output_tokens;
            let spent = response.usage.input_tokens + response.usage.output_tokens;
            self.store
                .record_tokens(&session.identity.id, &session.identity.user, spent)?;
            if let Verdict::Break(why) = session.guard_mut().charge_tokens(spent) {
                session.stop(why);
            }

            let assistant = response.message;
            last_text = assistant.text();
            self.persist(session, &assistant)?;
            history.push(assistant.clone());

            let calls: Vec<(String, String, Value)> = assistant
                .tool_uses()
                .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
                .collect();
            if calls.is_empty() {
                self.flush_audit(session)?;
                self.save_state(session)?;
                let end = match session.state().stopped.clone() {
                    Some(why) => TurnEnd::Stopped(why),
                    None => TurnEnd::Completed,
                };
                return Ok(TurnOutcome {
                    text: last_text,
                    end,
                    tool_calls,
                    usage,
                });
            }

            let mut results = Vec::with_capacity(calls.len());
            for (id, name, input) in &calls {
                if interrupt.is_cancelled() {
                    results.push(Block::ToolResult {
                        tool_use_id: id.clone(),
                        content: NOT_RUN_INTERRUPTED.into(),
                        is_error: true,
                        taint: Vec::new(),
                    });
                    continue;
                }
                tool_calls += 1;
                observer.tool_call(name, input);
                let result = self
                    .door
                    .dispatch(session, ToolCall { id, name, input })
                    .await;
                observer.tool_result(name, &result);
                results.push(Block::ToolResult {
                    tool_use_id: id.clone(),
                    content: result.content,
                    is_error: result.is_error,
                    taint: result.taint,
                });
            }
            self.flush_audit(session)?;
            let results = Message {
                role: Role::User,
                blocks: results,
            };
            self.persist(session, &results)?;
            history.push(results);
            self.save_state(session)?;
        }
        self.flush_audit(session)?;
        self.save_state(session)?;
        let end = match session.state().stopped.clone() {
            Some(why) => TurnEnd::Stopped(why),
            None if interrupt.is_cancelled() => TurnEnd::Interrupted,
            None => TurnEnd::MaxTurns,
        };
        Ok(TurnOutcome {
            text: last_text,
            end,
            tool_calls,
            usage,
        })
    }

    /// Ends a turn at a step boundary: what is stored is already whole, so
    /// only the audit barrier and the session state remain.
    fn interrupted(
        &self,
        session: &mut Session,
        text: String,
        tool_calls: u32,
        usage: Usage,
    ) -> Result<TurnOutcome, KernelError> {
        self.flush_audit(session)?;
        self.save_state(session)?;
        Ok(TurnOutcome {
            text,
            end: TurnEnd::Interrupted,
            tool_calls,
            usage,
        })
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}
