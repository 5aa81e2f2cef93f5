//! The committed AgentDojo traces (`tests/data/agentdojo/<suite>.json`,
//! written by `scripts/agentdojo-export`) and how one replay's tool outputs
//! are made from them.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub const SUITES: [&str; 4] = ["banking", "slack", "travel", "workspace"];

/// How a function reaches the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Only reads: not a sink.
    Read,
    /// Changes something outside the conversation: a `[taint]` sink.
    SideEffect,
    /// `get_webpage` / `post_webpage`: Bulwark's own `web:fetch` sink.
    Web,
}

#[derive(Debug, Deserialize)]
pub struct Function {
    pub name: String,
    pub kind: Kind,
}

/// One ground-truth call: the output is an index into [`Suite::strings`]
/// whose canaries mark where the injections land.
#[derive(Debug, Deserialize)]
pub struct Call {
    pub function: String,
    pub args: Value,
    pub output: usize,
}

#[derive(Debug, Deserialize)]
pub struct UserTask {
    pub id: String,
    /// What the user asked: the conversation's trusted text.
    pub prompt: String,
    pub calls: Vec<Call>,
    /// The injection vectors this task's outputs show (AgentDojo injects
    /// only these); empty when AgentDojo runs no attack against it.
    pub vectors: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct InjectionTask {
    pub id: String,
    pub calls: Vec<Call>,
    /// Attack name to the text it places in every vector.
    pub attacks: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
pub struct Suite {
    pub suite: String,
    /// The canary pattern, `{vector}` standing for the vector's id.
    pub canary: String,
    pub functions: Vec<Function>,
    /// Each vector's benign default content.
    pub vectors: BTreeMap<String, String>,
    pub user_tasks: Vec<UserTask>,
    pub injection_tasks: Vec<InjectionTask>,
    pub strings: Vec<String>,
}

impl Suite {
    pub fn load(name: &str) -> Suite {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/agentdojo")
            .join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run scripts/agentdojo-export", path.display()));
        let suite: Suite = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not a trace: {e}", path.display()));
        suite.check();
        suite
    }

    /// Every call names a function of the suite and an output it has.
    fn check(&self) {
        let calls = self.user_tasks.iter().flat_map(|t| &t.calls);
        for call in calls.chain(self.injection_tasks.iter().flat_map(|t| &t.calls)) {
            assert!(
                self.kind(&call.function).is_some(),
                "{}: {}",
                self.suite,
                call.function
            );
            assert!(
                call.output < self.strings.len(),
                "{}: output index",
                self.suite
            );
        }
    }

    pub fn kind(&self, function: &str) -> Option<Kind> {
        self.functions
            .iter()
            .find(|f| f.name == function)
            .map(|f| f.kind)
    }

    /// What fills each vector's canary: `attack` in the vectors the user
    /// task shows, the benign default everywhere else (as AgentDojo does).
    pub fn fill(&self, user: &UserTask, attack: Option<&str>) -> Vec<(String, String)> {
        self.vectors
            .iter()
            .map(|(vector, default)| {
                let text = match attack {
                    Some(text) if user.vectors.contains(vector) => text,
                    _ => default.as_str(),
                };
                (self.canary.replace("{vector}", vector), text.to_owned())
            })
            .collect()
    }
}

impl Suite {
    /// Whether `output` (a template) carries the attack when `user` is
    /// attacked: it holds the canary of a vector the task shows.
    pub fn shows_attack(&self, user: &UserTask, output: &str) -> bool {
        user.vectors
            .iter()
            .any(|v| output.contains(&self.canary.replace("{vector}", v)))
    }
}

/// `text` with every canary replaced by its fill.
pub fn substitute(text: &str, fill: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (canary, value) in fill {
        if out.contains(canary.as_str()) {
            out = out.replace(canary.as_str(), value);
        }
    }
    out
}

/// The arguments with canaries filled too: a ground truth that copies
/// injected content into a call (a file forwarded by email) carries it.
pub fn substitute_args(args: &Value, fill: &[(String, String)]) -> Value {
    match args {
        Value::String(s) => Value::String(substitute(s, fill)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| substitute_args(v, fill)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute_args(v, fill)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The attack lands only in the vectors the user task shows; every other
/// canary (in the injection task's outputs too) gets its benign default,
/// in outputs and in copied arguments alike.
#[test]
fn the_attack_fills_only_the_vectors_the_task_shows() {
    let suite = Suite::load("slack");
    let user = suite
        .user_tasks
        .iter()
        .find(|t| !t.vectors.is_empty() && t.vectors.len() < suite.vectors.len())
        .expect("a task that shows some vectors but not all");
    let fill = suite.fill(user, Some("ATTACK"));
    let all: String = suite
        .vectors
        .keys()
        .map(|v| suite.canary.replace("{vector}", v))
        .collect();
    let filled = substitute(&all, &fill);
    assert!(!filled.contains("<CANARY---"), "{filled}");
    assert_eq!(filled.matches("ATTACK").count(), user.vectors.len());
    let args = substitute_args(&serde_json::json!({"body": [all]}), &fill);
    assert_eq!(args["body"][0], filled);
    let benign = substitute(&all, &suite.fill(user, None));
    assert!(!benign.contains("ATTACK") && !benign.contains("<CANARY---"));
}
