//! Replays one (user task, injection task, attack) through the real door:
//! the user task's ground-truth calls in order, then the injection task's,
//! in one session, with an approver that notes each question and answers
//! Deny (nobody is there).

use super::tools::{self, Slot};
use super::trace::{Call, InjectionTask, Kind, Suite, UserTask, substitute, substitute_args};
use crate::common;
use bulwark_audit::{Decision, MemorySink, Reason};
use bulwark_kernel::{ApprovalAnswer, ApprovalRequest, Approver, Door, Session, ToolCall};
use bulwark_policy::EffectivePolicy;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Session,
    Value,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Session => "session",
            Mode::Value => "value",
        }
    }
}

/// Counts each question; answers none of them yes.
#[derive(Default)]
pub struct NobodyThere {
    asked: AtomicUsize,
}

#[async_trait::async_trait]
impl Approver for NobodyThere {
    async fn ask(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.fetch_add(1, Ordering::SeqCst);
        ApprovalAnswer::Deny
    }
}

/// What one call came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    /// Ran, nobody asked.
    Ran,
    /// A person was asked (and said no).
    Asked,
    /// Refused for another reason: a harness fault, never a result.
    Refused(Reason),
}

/// The agent manifest of a replay: every function of the suite allowed,
/// any host reachable, the suite's side effects declared as sinks that
/// need a person for external content, and a loop guard that never trips
/// on ground truth.
pub fn manifest(suite: &Suite, mode: Mode) -> String {
    let mut m = String::from(
        "[agent]\nname = \"tester\"\n[tools]\nallow = [\"dojo\", \"web\"]\n\
         [[capabilities]]\nkind = \"net_connect\"\nhost = \"*\"\n\
         [loop_guard]\nwarn_threshold = 100\nblock_threshold = 200\n\
         outcome_repeat_block = 200\nping_pong_cycles = 200\nmax_tool_calls = 1000\n",
    );
    writeln!(m, "[taint]\nmode = \"{}\"\n[taint.sinks]", mode.name()).unwrap();
    for f in suite
        .functions
        .iter()
        .filter(|f| f.kind == Kind::SideEffect)
    {
        writeln!(m, "\"dojo:{}\" = {{ external = \"approve\" }}", f.name).unwrap();
    }
    m
}

/// One suite's tools, policy and approver, for one mode.
pub struct Replayer<'s> {
    pub suite: &'s Suite,
    home: tempfile::TempDir,
    policy: EffectivePolicy,
    registry: bulwark_kernel::ToolRegistry,
    slot: Slot,
    approver: Arc<NobodyThere>,
}

impl<'s> Replayer<'s> {
    pub fn new(suite: &'s Suite, mode: Mode) -> Self {
        let slot = Slot::default();
        let registry = tools::registry(suite, &slot);
        let policy = common::policy(&registry, &manifest(suite, mode));
        Self {
            suite,
            home: tempfile::tempdir().unwrap(),
            policy,
            registry,
            slot,
            approver: Arc::new(NobodyThere::default()),
        }
    }

    /// A fresh session and door: nothing carries over between replays.
    pub fn open(&self) -> (Door, Session) {
        let sink = Arc::new(MemorySink::new());
        let approver: Arc<dyn Approver> = self.approver.clone();
        let door = common::door(self.registry.clone(), sink, approver);
        (door, common::session(self.home.path(), self.policy.clone()))
    }

    /// Runs `calls` in order with each canary filled from `fill`.
    pub async fn run(
        &self,
        door: &Door,
        session: &mut Session,
        calls: &[Call],
        fill: &[(String, String)],
    ) -> Vec<Fate> {
        let mut fates = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let output = substitute(&self.suite.strings[call.output], fill);
            *self.slot.lock().unwrap() = Some(output);
            let args = substitute_args(&call.args, fill);
            let asked = self.approver.asked.load(Ordering::SeqCst);
            let id = format!("c{i}");
            let result = door
                .dispatch(
                    session,
                    ToolCall {
                        id: &id,
                        name: &call.function,
                        input: &args,
                    },
                )
                .await;
            let was_asked = self.approver.asked.load(Ordering::SeqCst) > asked;
            fates.push(match (result.decision, was_asked) {
                (_, true) => Fate::Asked,
                (Decision::Allowed, false) => Fate::Ran,
                (_, false) => Fate::Refused(result.reason),
            });
        }
        fates
    }

    /// The user task alone, its vectors holding their benign defaults.
    pub async fn benign(&self, user: &UserTask) -> Vec<Fate> {
        let (door, mut session) = self.open();
        // The user's request is the conversation's trusted text, as the
        // agent loop notes it before the first call.
        session.note_trusted_text(&user.prompt);
        let fill = self.suite.fill(user, None);
        self.run(&door, &mut session, &user.calls, &fill).await
    }

    /// The user task with `text` in its vectors, then the injection task.
    pub async fn attacked(
        &self,
        user: &UserTask,
        injection: &InjectionTask,
        text: &str,
    ) -> Attacked {
        let (door, mut session) = self.open();
        session.note_trusted_text(&user.prompt);
        let fill = self.suite.fill(user, Some(text));
        let user_fates = self.run(&door, &mut session, &user.calls, &fill).await;
        let delivered = user.calls.iter().zip(&user_fates).any(|(call, fate)| {
            *fate == Fate::Ran
                && self
                    .suite
                    .shows_attack(user, &self.suite.strings[call.output])
        });
        let injected = self.run(&door, &mut session, &injection.calls, &fill).await;
        Attacked {
            user: user_fates,
            injected,
            delivered,
        }
    }
}

/// One attacked replay.
pub struct Attacked {
    pub user: Vec<Fate>,
    pub injected: Vec<Fate>,
    /// Whether an output carrying the attack reached the conversation. When
    /// the door held back every such call, the model never read the
    /// injection, and the injection task's calls that follow in the replay
    /// would not have been made.
    pub delivered: bool,
}
