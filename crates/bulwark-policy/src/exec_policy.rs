//! The `[exec]` manifest section: which commands an agent may run, checked
//! through the wrappers (`env`, `sh -c`, `xargs`, `find -exec`, `nice`, ...)
//! that would otherwise let an allowed-looking command run anything.
//!
//! ```toml
//! [exec]
//! mode = "allowlist"
//! [[exec.allow]]
//! prefix = ["git", "status"]
//! examples = [["git", "status", "-s"]]
//! counter_examples = [["git", "push"]]
//! ```
//!
//! [`ExecPolicy::check`] unwraps wrappers recursively and requires every
//! command in the chain to be allowed: a wrapper is transparent only when
//! its own options are understood, and the innermost real command must
//! match a rule. What cannot be seen through is refused (fail closed).
//!
//! Programs that run other programs but are not modelled here (`strace`,
//! `make`, `python -c`, ...) are ordinary commands: a rule for them allows
//! whatever they run.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Seg;
use crate::exec_wrappers::{self as wrappers, Kind, Tail, Unwrap};

/// How many wrappers deep a command may be nested.
pub const MAX_EXEC_DEPTH: usize = 8;

/// Whether, and which, commands may run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecMode {
    /// No command may run.
    #[default]
    Deny,
    /// Commands matching an `[[exec.allow]]` rule, through wrappers that are
    /// understood.
    Allowlist,
    /// Any command, through wrappers that are understood. Privilege and
    /// namespace changers (`sudo`, `unshare`, ...) are still refused.
    Full,
}

impl fmt::Display for ExecMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExecMode::Deny => "deny",
            ExecMode::Allowlist => "allowlist",
            ExecMode::Full => "full",
        })
    }
}

/// The `[exec]` section of a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecSection {
    #[serde(default)]
    pub mode: ExecMode,
    /// Only meaningful (and only accepted) in allowlist mode.
    #[serde(default)]
    pub allow: Vec<ExecRule>,
}

/// One `[[exec.allow]]` rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecRule {
    /// An argv prefix, each element matched exactly (no globs); `argv[0]`
    /// as written (`git` does not match `/usr/bin/git`).
    pub prefix: Vec<String>,
    /// Argvs this rule must allow (checked when the manifest is parsed).
    #[serde(default)]
    pub examples: Vec<Vec<String>>,
    /// Argvs the whole policy must refuse (checked when the manifest is
    /// parsed).
    #[serde(default)]
    pub counter_examples: Vec<Vec<String>>,
}

/// A compiled, validated `[exec]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecPolicy {
    mode: ExecMode,
    rules: Vec<Vec<String>>,
}

/// What was checked for an allowed command, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecApproval {
    /// Every command checked, in order: the argv itself first, then each
    /// command unwrapped from it (a `find` is followed by its `-exec`
    /// commands).
    pub commands: Vec<Vec<String>>,
    /// Parallel to `commands`: the first rule that allowed it, or `None` for
    /// a wrapper seen through (and for everything in full mode).
    pub rules: Vec<Option<usize>>,
}

/// Why a command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecDenyReason {
    /// `[exec] mode = "deny"`.
    ModeDeny,
    /// Empty argv or command name, NUL byte, missing operand, ...
    Malformed,
    /// `sudo`, `unshare` and the like: never allowed.
    Escalator,
    /// The command matches no `[[exec.allow]]` rule.
    NoMatchingRule,
    /// A wrapper option that is not understood.
    UnknownOption,
    /// A wrapper option that is understood but refused (`env -S`,
    /// `ionice -p`, `exec -a`, ...).
    Unsupported,
    /// A `-c` script that is more than one simple command.
    Script,
    /// `env NAME=VALUE` (or a script assignment) of a variable that makes
    /// programs run other code (`LD_PRELOAD`, `PATH`, `GIT_SSH_COMMAND`...).
    DangerousVariable,
    /// Wrapped more than [`MAX_EXEC_DEPTH`] deep.
    TooDeep,
    /// `xargs` or `find -exec ... {}` would add arguments that could turn
    /// a wrapper into something else.
    AppendedArguments,
}

/// A refused command: which one (possibly unwrapped from the argv given)
/// and why, in a sentence the user can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExecDenial {
    /// The refused command: the argv given, or one unwrapped from it.
    pub command: Vec<String>,
    /// The wrappers it was found inside, outermost first (`env`, `sh -c`).
    pub inside: Vec<String>,
    pub reason: ExecDenyReason,
    pub message: String,
}

/// An `[exec]` section that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecPolicyError {
    #[error(
        "rules only apply in allowlist mode, and mode is \"{mode}\"{default}; set [exec] mode = \"allowlist\" or remove the [[exec.allow]] rules",
        default = if *mode == ExecMode::Deny { " (the default)" } else { "" }
    )]
    RulesOutsideAllowlist { mode: ExecMode },
    #[error(
        "rule {rule}: prefix is empty; give at least the command name, e.g. [\"git\", \"status\"]"
    )]
    EmptyPrefix { rule: usize },
    #[error("rule {rule}: prefix[{index}] is an empty string")]
    EmptyElement { rule: usize, index: usize },
    #[error("rule {rule}: prefix[{index}] contains a NUL byte")]
    NulElement { rule: usize, index: usize },
    #[error("rule {rule}: `{name}` is always refused, so this rule could never match")]
    AlwaysRefused { rule: usize, name: String },
    #[error(
        "rule {rule}: example {index} `{}` is not allowed by this rule: {why}",
        show(example)
    )]
    ExampleNotAllowed {
        rule: usize,
        index: usize,
        example: Vec<String>,
        why: String,
    },
    #[error(
        "rule {rule}: counter-example {index} `{}` is allowed by the policy ({}); narrow the rules or fix the counter-example",
        show(example),
        show_rules(by)
    )]
    CounterExampleAllowed {
        rule: usize,
        index: usize,
        example: Vec<String>,
        /// The rules that allowed it (empty in full mode).
        by: Vec<usize>,
    },
}

fn show_rules(by: &[usize]) -> String {
    match by {
        [] => "every command is allowed".to_string(),
        [r] => format!("by rule {r}"),
        _ => format!(
            "by rules {}",
            by.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl ExecPolicyError {
    /// The manifest field the error is about.
    pub(crate) fn field(&self) -> Vec<Seg<'static>> {
        use Seg::{Idx, Key};
        let rule = |r: usize, rest: &[Seg<'static>]| {
            let mut v = vec![Key("exec"), Key("allow"), Idx(r)];
            v.extend_from_slice(rest);
            v
        };
        match self {
            Self::RulesOutsideAllowlist { .. } => vec![Key("exec"), Key("allow")],
            Self::EmptyPrefix { rule: r } => rule(*r, &[Key("prefix")]),
            Self::EmptyElement { rule: r, index } | Self::NulElement { rule: r, index } => {
                rule(*r, &[Key("prefix"), Idx(*index)])
            }
            Self::AlwaysRefused { rule: r, .. } => rule(*r, &[Key("prefix"), Idx(0)]),
            Self::ExampleNotAllowed { rule: r, index, .. } => {
                rule(*r, &[Key("examples"), Idx(*index)])
            }
            Self::CounterExampleAllowed { rule: r, index, .. } => {
                rule(*r, &[Key("counter_examples"), Idx(*index)])
            }
        }
    }
}

impl ExecPolicy {
    /// No command may run.
    pub fn deny() -> Self {
        Self::default()
    }

    /// Compile and validate a section, including its examples and
    /// counter-examples.
    pub fn from_section(section: &ExecSection) -> Result<Self, ExecPolicyError> {
        if section.mode != ExecMode::Allowlist && !section.allow.is_empty() {
            return Err(ExecPolicyError::RulesOutsideAllowlist { mode: section.mode });
        }
        for (r, rule) in section.allow.iter().enumerate() {
            let Some(first) = rule.prefix.first() else {
                return Err(ExecPolicyError::EmptyPrefix { rule: r });
            };
            for (index, e) in rule.prefix.iter().enumerate() {
                if e.is_empty() {
                    return Err(ExecPolicyError::EmptyElement { rule: r, index });
                }
                if e.contains('\0') {
                    return Err(ExecPolicyError::NulElement { rule: r, index });
                }
            }
            if wrappers::classify(wrappers::command_name(first)) == Some(Kind::Escalator) {
                return Err(ExecPolicyError::AlwaysRefused {
                    rule: r,
                    name: first.clone(),
                });
            }
        }
        let policy = ExecPolicy {
            mode: section.mode,
            rules: section.allow.iter().map(|r| r.prefix.clone()).collect(),
        };
        for (r, rule) in section.allow.iter().enumerate() {
            for (index, example) in rule.examples.iter().enumerate() {
                let why = match policy.check(example) {
                    Err(d) => Some(d.message),
                    Ok(a) if !a.rule_checked().any(|c| prefix_matches(&rule.prefix, c)) => {
                        Some(format!(
                            "it is allowed, but {} and not by this rule's prefix `{}`",
                            show_rules(&a.matched()),
                            show(&rule.prefix)
                        ))
                    }
                    Ok(_) => None,
                };
                if let Some(why) = why {
                    return Err(ExecPolicyError::ExampleNotAllowed {
                        rule: r,
                        index,
                        example: example.clone(),
                        why,
                    });
                }
            }
            for (index, example) in rule.counter_examples.iter().enumerate() {
                if let Ok(a) = policy.check(example) {
                    return Err(ExecPolicyError::CounterExampleAllowed {
                        rule: r,
                        index,
                        example: example.clone(),
                        by: a.matched(),
                    });
                }
            }
        }
        Ok(policy)
    }

    pub fn mode(&self) -> ExecMode {
        self.mode
    }

    /// The rules' prefixes, in order (indices as in [`ExecApproval::rules`]).
    pub fn rules(&self) -> &[Vec<String>] {
        &self.rules
    }

    /// May `argv` run? Every command in its wrapper chain is checked.
    pub fn check(&self, argv: &[String]) -> Result<ExecApproval, ExecDenial> {
        let deny = |reason, message: String| ExecDenial {
            command: argv.to_vec(),
            inside: Vec::new(),
            reason,
            message,
        };
        if self.mode == ExecMode::Deny {
            return Err(deny(
                ExecDenyReason::ModeDeny,
                "no command may run: [exec] mode is \"deny\" (the default); set mode = \
                 \"allowlist\" and add [[exec.allow]] rules"
                    .to_string(),
            ));
        }
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(deny(
                ExecDenyReason::Malformed,
                "the command contains a NUL byte, which no program can receive".to_string(),
            ));
        }
        let mut walk = Walk {
            policy: self,
            approval: ExecApproval {
                commands: Vec::new(),
                rules: Vec::new(),
            },
            inside: Vec::new(),
        };
        walk.visit(argv, 0, None)?;
        Ok(walk.approval)
    }

    fn matching_rule(&self, argv: &[String]) -> Option<usize> {
        self.rules.iter().position(|p| prefix_matches(p, argv))
    }
}

impl ExecApproval {
    /// The commands that were matched against the rules (not wrappers).
    fn rule_checked(&self) -> impl Iterator<Item = &Vec<String>> {
        self.commands
            .iter()
            .zip(&self.rules)
            .filter(|(_, r)| r.is_some())
            .map(|(c, _)| c)
    }

    /// The rules that allowed something, deduplicated, in order.
    fn matched(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.rules.iter().flatten().copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn prefix_matches(prefix: &[String], argv: &[String]) -> bool {
    argv.len() >= prefix.len() && prefix.iter().zip(argv).all(|(p, a)| p == a)
}

/// An argv for messages, shell-quoted where needed and shortened.
fn show(argv: &[String]) -> String {
    const MAX: usize = 80;
    let s = argv
        .iter()
        .map(|a| shlex::try_quote(a).map_or_else(|_| format!("{a:?}"), |q| q.into_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

struct Walk<'p> {
    policy: &'p ExecPolicy,
    approval: ExecApproval,
    /// Labels of the wrappers around the command being visited.
    inside: Vec<String>,
}

impl Walk<'_> {
    /// " (inside `env` → `sh -c`)", or "" at the top.
    fn at(&self) -> String {
        if self.inside.is_empty() {
            return String::new();
        }
        let chain: Vec<String> = self.inside.iter().map(|w| format!("`{w}`")).collect();
        format!(" (inside {})", chain.join(" → "))
    }

    fn deny(&self, argv: &[String], reason: ExecDenyReason, message: String) -> ExecDenial {
        ExecDenial {
            command: argv.to_vec(),
            inside: self.inside.clone(),
            reason,
            message,
        }
    }

    /// Check `argv` at nesting `depth`. `appended_by` names the wrapper
    /// (`xargs`, `find -exec`) that may append arguments to it.
    fn visit(
        &mut self,
        argv: &[String],
        depth: usize,
        appended_by: Option<&str>,
    ) -> Result<(), ExecDenial> {
        let at = self.at();
        if depth > MAX_EXEC_DEPTH {
            return Err(self.deny(
                argv,
                ExecDenyReason::TooDeep,
                format!(
                    "`{}`{at} is wrapped more than {MAX_EXEC_DEPTH} commands deep; run it with \
                     fewer wrappers",
                    show(argv)
                ),
            ));
        }
        let Some(first) = argv.first() else {
            return Err(self.deny(
                argv,
                ExecDenyReason::Malformed,
                format!("the command{at} is empty: there is nothing to run"),
            ));
        };
        if first.is_empty() {
            return Err(self.deny(
                argv,
                ExecDenyReason::Malformed,
                format!("the command name{at} is empty"),
            ));
        }
        self.approval.commands.push(argv.to_vec());
        self.approval.rules.push(None);
        let Some(kind) = wrappers::classify(wrappers::command_name(first)) else {
            return self.plain(argv, &at);
        };
        if kind == Kind::Escalator {
            return Err(self.deny(
                argv,
                ExecDenyReason::Escalator,
                format!(
                    "`{first}`{at} is always refused: it changes privileges or namespaces, which \
                     no [[exec.allow]] rule can grant"
                ),
            ));
        }
        let step =
            wrappers::unwrap(kind, argv, &at).map_err(|r| self.deny(argv, r.reason, r.message))?;
        let appended = |by: Option<&str>| -> Result<(), ExecDenial> {
            match by {
                Some(by) => Err(self.deny(
                    argv,
                    ExecDenyReason::AppendedArguments,
                    format!(
                        "`{by}` would append arguments to `{}`, which could make it run a \
                         command that was not checked; give it a complete command instead",
                        show(argv)
                    ),
                )),
                None => Ok(()),
            }
        };
        match step {
            Unwrap::Plain => {
                appended(appended_by)?;
                self.plain(argv, &at)
            }
            Unwrap::Inner { inner, label, tail } => {
                let by = match tail {
                    Tail::Passed => appended_by.map(str::to_string),
                    Tail::Appended => Some(label.clone()),
                    Tail::Absorbed => None,
                };
                self.inside.push(label);
                let r = self.visit(&inner, depth + 1, by.as_deref());
                self.inside.pop();
                r
            }
            Unwrap::Find { execs } => {
                appended(appended_by)?;
                self.plain(argv, &at)?;
                let label = format!("{first} -exec");
                for (cmd, substituted) in execs {
                    self.inside.push(label.clone());
                    let r = self.visit(&cmd, depth + 1, substituted.then_some(label.as_str()));
                    self.inside.pop();
                    r?;
                }
                Ok(())
            }
        }
    }

    /// A command that runs nothing we can see: it must match a rule.
    fn plain(&mut self, argv: &[String], at: &str) -> Result<(), ExecDenial> {
        if self.policy.mode != ExecMode::Allowlist {
            return Ok(());
        }
        if let Some(r) = self.policy.matching_rule(argv) {
            if let Some(slot) = self.approval.rules.last_mut() {
                *slot = Some(r);
            }
            return Ok(());
        }
        let mut message = format!("`{}`{at} matches no [[exec.allow]] rule", show(argv));
        let first = argv.first().map_or("", String::as_str);
        let base = wrappers::command_name(first);
        if self.policy.rules.is_empty() {
            message.push_str(" (there are none)");
        } else if base != first
            && self
                .policy
                .rules
                .iter()
                .any(|p| p.first().is_some_and(|f| f == base))
        {
            message.push_str(&format!(
                "; rules match the command name exactly as written, and `{first}` is not `{base}`"
            ));
        }
        Err(self.deny(argv, ExecDenyReason::NoMatchingRule, message))
    }
}
